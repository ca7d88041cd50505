// The engine thread of continuous batching: admit queued requests into free slots (their
// cached prefix copied in), build one batch from every slot's next token and chunks of pending
// prompts, run Forward (timed, to size the chunks), sample each slot from its own logits row,
// and hand text to the requests' handles; a finished slot's rows go to the prefix cache.
//
// Exactness with the prefix cache: a cached row holds the bits the forward wrote for that
// token at that position. Where every kernel sums a token in the same order whatever its batch
// (Q4_0, Q8_0, Q6_K weights; an F16 cache) the rows, and so the logits after them, are those of
// a fresh prefill bit for bit (tests/engine/prefix_cache_test.cc). Q4_K and F32 weights sum a
// token by its place in its batch (kernels/quant.h GroupedTokens), as does an F32 cache's value
// sum (model/attention_core.h BatchSumOrder), so rows computed while decoding differ from a
// prefill's in the last bits, as they already do between any two batch layouts; blocks of a
// multiple of 4 positions at least keep the uncached rest of a prompt on the 4-token tiles a
// whole-prompt batch would put it on.
//
// A model with a recurrent state (Qwen3.5's DeltaNet layers) restores a prefix only up to a
// block that carries the state after it (prefix_cache.h), and the state exists only at the end
// of a step. So the scheduler keeps the state where a step ends on a block boundary: while
// decoding every boundary passes at a step's end (one token a step), and the latest is kept,
// which covers the last whole block of what the slot held (the next chat turn); a prompt's
// chunks are cut at two planned boundaries, the end of the cached chain it matched beyond its
// checkpoints (where requests sharing a system prompt part ways: the next one restores there)
// and its own last whole block below its last token (the same prompt again). Cutting a chunk
// changes no number where the kernels sum a token in the same order whatever its batch (above),
// and the DeltaNet recurrence runs token by token whatever the chunk, so the state kept is the
// very state a fresh prefill reaches. Keeping every boundary of a prompt instead would cut its
// prefill into block-sized chunks and keep a state (megabytes for a real model) per block.
#include "engine/scheduler.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "engine/sequence_step.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {

// One sequence slot of the KV cache and the request generating in it.
struct Scheduler::Slot {
  int32_t id = 0;
  bool active = false;
  bool reserved = false;  // an embedding runs in it (Embed): no request is admitted to it
  std::shared_ptr<RequestHandle> handle;
  ScheduledRequest request;
  std::unique_ptr<Sampler> sampler;
  std::optional<SequenceStep> step;  // text, stop strings and limits; counts the tokens generated
  size_t n_fed = 0;          // prompt tokens already in the cache
  int32_t n_cached = 0;      // of which copied from the prefix cache
  // A model with a recurrent state: the prompt positions where a chunk ends so that the state
  // there is kept (ascending), the states kept at them, and the latest block boundary's.
  std::vector<int32_t> checkpoint_plan;
  std::vector<StateCheckpoint> checkpoints;
  StateCheckpoint latest;
  // The tokens whose rows went to the prefix cache when the slot's last request ended
  // (its slot file, SlotTokens).
  std::vector<int32_t> saved_tokens;
  std::vector<int32_t> generated;  // sampled tokens, in order (all but the last are in the cache)
  int32_t next_token = -1;   // sampled and not yet fed (-1: still in the prompt)
  int logits_row = -1;       // this step's row of logits_, or -1
  int32_t sampled = -1;      // this step's token, drawn by SampleSlot (maybe on a pool thread)
  Logprobs logprobs;         // and its logprobs, when the request wants them

  int32_t n_prompt() const { return static_cast<int32_t>(request.prompt.size()); }
};

void RequestOutput::Append(RequestOutput&& more) {
  text.append(more.text);
  tokens.insert(tokens.end(), more.tokens.begin(), more.tokens.end());
  for (Logprobs& lp : more.logprobs) logprobs.push_back(std::move(lp));
  done = more.done;
  status = more.status;
  finish_reason = more.finish_reason;
  stop_index = more.stop_index;
  prompt_tokens = more.prompt_tokens;
  cached_tokens = more.cached_tokens;
  completion_tokens = more.completion_tokens;
}

bool RequestHandle::Wait(RequestOutput& out, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [&] { return has_output_; })) return false;
  out = std::move(pending_);
  pending_ = RequestOutput{};
  has_output_ = false;
  return true;
}

void RequestHandle::Cancel() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancelled_ = true;
}

bool RequestHandle::cancelled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cancelled_;
}

void RequestHandle::Post(RequestOutput&& output) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.Append(std::move(output));
    has_output_ = true;
  }
  ready_.notify_all();
}

int64_t DefaultCacheRam() {
  constexpr int64_t kMax = int64_t{8} << 30;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return std::min(kMax, kib * 1024 / 4);
  }
  return int64_t{1} << 30;  // no /proc/meminfo: a modest 1 GiB
}

Status SchedulerOptions::Validate() const {
  if (n_parallel < 1 || n_parallel > 1024) return InvalidArgument("n_parallel must be in [1, 1024]");
  if (n_ctx < 0) return InvalidArgument("n_ctx must be >= 0 (0: the model's context)");
  if (max_queue < 0) return InvalidArgument("max_queue must be >= 0");
  // With n_batch >= n_parallel every step has room for at least one prompt token beside the
  // decoding sequences, so a new request always makes progress.
  if (n_batch < n_parallel) return InvalidArgument("n_batch must be >= n_parallel");
  if (kv_type != DType::kF32 && kv_type != DType::kF16 && kv_type != DType::kQ8_0) {
    return InvalidArgument("the KV cache type must be f32, f16 or q8_0");
  }
  if (cache_ram_bytes < 0 && cache_ram_bytes != kCacheRamAuto) {
    return InvalidArgument("cache_ram_bytes must be >= 0 (0: no prefix cache) or kCacheRamAuto");
  }
  // Blocks of a multiple of 4 positions keep a cached prefix's end on the 4-token tiles of the
  // batched matmuls (kernels/quant.h GroupedTokens): the uncached rest of a prompt then sums
  // each token in the order a whole-prompt batch would.
  if (cache_block_tokens < 4 || cache_block_tokens > 4096 || cache_block_tokens % 4 != 0) {
    return InvalidArgument("cache_block_tokens must be a multiple of 4 in [4, 4096]");
  }
  if (prefill_chunk < 0) return InvalidArgument("prefill_chunk must be >= 0 (0: measured)");
  if (!(prefill_step_factor >= 1.0 && prefill_step_factor <= 100.0)) {
    return InvalidArgument("prefill_step_factor must be in [1, 100]");
  }
  return Status::Ok();
}

Scheduler::Scheduler(LoadedModel& model, const Context& ctx, const SchedulerOptions& options)
    : model_(model), ctx_(ctx), options_(options) {}

Scheduler::~Scheduler() { Stop(); }

Status Scheduler::Start() {
  COHORT_CHECK(!started_);
  COHORT_RETURN_IF_ERROR(options_.Validate());
  n_ctx_ = options_.n_ctx > 0 ? options_.n_ctx : model_.config().n_ctx_train;
  if (n_ctx_ <= 0) return InvalidArgument("the model names no context length: set n_ctx");
  model::KvCacheOptions kv;
  kv.n_ctx = n_ctx_;
  kv.n_seq = options_.n_parallel;
  kv.type = options_.kv_type;
  COHORT_ASSIGN_OR_RETURN(cache_, model_.model().NewKvCache(kv));
  const int64_t cache_ram = options_.cache_ram_bytes == kCacheRamAuto ? DefaultCacheRam() : options_.cache_ram_bytes;
  // With a recurrent state (Qwen3.5's DeltaNet layers) the cache keeps state checkpoints
  // beside the rows (see the top of this file).
  // A model spread over ranks keeps rank 0's slice in cache_; its replicas have every other
  // rank keep its own slice of each block (model/kv_block_replicas.h). Its states are not
  // replicated, so a recurrent model spread over ranks has no prefix cache.
  model::KvBlockReplicas* replicas =
      model_.in_process() ? nullptr : dynamic_cast<model::KvBlockReplicas*>(&model_.model());
  const bool replicable = replicas != nullptr && cache_->sequence_state() == nullptr;
  if (cache_ram > 0 && (model_.in_process() || replicable)) {
    prefix_cache_ = std::make_unique<PrefixCache>(*cache_, cache_ram, options_.cache_block_tokens);
    prefix_cache_->SetReplicas(replicas);
    stats_.prefix_cache_bytes_max = cache_ram;
  }
  // Until steps have been measured, a modest chunk: a long prompt's first step must not stall
  // the streams for seconds.
  prefill_chunk_ = options_.prefill_chunk > 0 ? options_.prefill_chunk : std::min<int32_t>(16, options_.n_batch);
  stats_.prefill_chunk = prefill_chunk_;
  for (int32_t i = 0; i < options_.n_parallel; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->id = i;
  }
  logits_.resize(static_cast<size_t>(options_.n_parallel) * model_.config().n_vocab);
  stats_.slots_total = options_.n_parallel;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    started_ = true;
  }
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Scheduler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_) {
      stopping_ = true;
      return;
    }
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status Scheduler::CheckRequest(const ScheduledRequest& request) const {
  COHORT_RETURN_IF_ERROR(request.options.Validate());
  const int32_t n_vocab = model_.config().n_vocab;
  COHORT_RETURN_IF_ERROR(request.options.sampling.Validate(n_vocab));
  if (request.prompt.empty()) return InvalidArgument("the prompt has no tokens");
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= n_vocab) {
      return InvalidArgument("prompt token " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  const int64_t n_prompt = static_cast<int64_t>(request.prompt.size());
  if (n_prompt >= n_ctx_) {
    return OutOfRange("the prompt has " + std::to_string(n_prompt) + " tokens; the context holds " +
                      std::to_string(n_ctx_) + " with room for at least one completion token");
  }
  return Status::Ok();
}

Result<std::shared_ptr<RequestHandle>> Scheduler::Submit(ScheduledRequest request) {
  std::vector<ScheduledRequest> one;
  one.push_back(std::move(request));
  COHORT_ASSIGN_OR_RETURN(std::vector<std::shared_ptr<RequestHandle>> handles, SubmitAll(std::move(one)));
  return std::move(handles.front());
}

Result<std::vector<std::shared_ptr<RequestHandle>>> Scheduler::SubmitAll(std::vector<ScheduledRequest> requests) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.ok()) return failure_;
    if (!started_ || stopping_) return Unavailable("the scheduler is not running");
  }
  for (const ScheduledRequest& request : requests) COHORT_RETURN_IF_ERROR(CheckRequest(request));
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<Queued> queued;
  for (ScheduledRequest& request : requests) {
    auto handle = handles.emplace_back(std::make_shared<RequestHandle>());
    if (request.options.max_tokens == 0) {
      RequestOutput out;
      out.done = true;
      out.prompt_tokens = static_cast<int32_t>(request.prompt.size());
      handle->Post(std::move(out));
      continue;
    }
    queued.push_back(Queued{std::move(request), std::move(handle)});
  }
  if (queued.empty()) return handles;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_) return Unavailable("the scheduler is not running");
    if (queue_.size() + queued.size() > static_cast<size_t>(options_.max_queue)) {
      return ResourceExhausted("the request queue is full (" + std::to_string(options_.max_queue) +
                               " waiting); try again later");
    }
    if (!failure_.ok()) return failure_;
    for (Queued& q : queued) queue_.push_back(std::move(q));
    stats_.queue_depth = static_cast<int32_t>(queue_.size());
  }
  wake_.notify_all();
  return handles;
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

Status Scheduler::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

bool Scheduler::Admit() {
  bool any_active = false;
  for (auto& slot : slots_) any_active = any_active || slot->active;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || !tasks_.empty() || any_active; });
    if (stopping_) return false;
  }
  // The tasks first: an embedding may reserve a slot, which is then not free.
  RunTasks();
  std::vector<Slot*> free;
  for (auto& slot : slots_) {
    if (!slot->active && !slot->reserved) free.push_back(slot.get());
  }
  std::vector<Queued> admitted;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    while (!queue_.empty() && admitted.size() < free.size()) {
      admitted.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    stats_.queue_depth = static_cast<int32_t>(queue_.size());
  }
  for (size_t i = 0; i < admitted.size(); ++i) StartSlot(*free[i], std::move(admitted[i]));
  return true;
}

Status Scheduler::RunOnEngine(std::function<void()> task) {
  auto done = std::make_shared<std::promise<bool>>();
  std::future<bool> ran = done->get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_) return Unavailable("the scheduler is not running");
    tasks_.push_back([task = std::move(task), done] {
      task();
      done->set_value(true);
    });
  }
  wake_.notify_all();
  ran.wait();
  return Status::Ok();
}

Result<std::vector<float>> Scheduler::Embed(std::span<const int32_t> tokens, model::Pooling pooling) {
  if (pooling != model::Pooling::kMean && pooling != model::Pooling::kCls && pooling != model::Pooling::kLast) {
    return InvalidArgument(fmt::format("embeddings: pooling '{}' is not supported (mean, cls or last)",
                                       model::PoolingName(pooling)));
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgument("embeddings: the input has no tokens");
  if (n > n_ctx_) {
    return OutOfRange(fmt::format("embeddings: the input has {} tokens; the context holds {}", n, n_ctx_));
  }
  const int32_t n_vocab = model_.config().n_vocab;
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return InvalidArgument(fmt::format("embeddings: token {} is outside the vocabulary [0, {})", tokens[i], n_vocab));
    }
  }
  std::lock_guard<std::mutex> one_at_a_time(embed_mutex_);
  // A free slot of the cache, reserved so that no request is admitted to it meanwhile: every
  // rank of a model spread over processes keeps its cache in step with this one, so an
  // embedding runs in it rather than in a cache of its own. With every slot busy it waits
  // for one, as a queued request does.
  int32_t seq = -1;
  for (;;) {
    COHORT_RETURN_IF_ERROR(RunOnEngine([&] {
      for (auto& slot : slots_) {
        if (slot->active || slot->reserved) continue;
        slot->reserved = true;
        seq = slot->id;
        cache_->Truncate(seq, 0);
        return;
      }
    }));
    if (seq >= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const int64_t n_embd = model_.config().n_embd;
  std::vector<double> sum(static_cast<size_t>(n_embd), 0.0);
  std::vector<float> hidden;
  model::Batch batch;
  Status status;
  for (int64_t begin = 0; begin < n && status.ok(); begin += options_.n_batch) {
    const int64_t end = std::min<int64_t>(n, begin + options_.n_batch);
    const Status ran = RunOnEngine([&] {
      // Mean pooling reads every position; CLS the first, last the last.
      batch.Clear();
      for (int64_t i = begin; i < end; ++i) {
        const bool want = pooling == model::Pooling::kMean || (pooling == model::Pooling::kCls && i == 0) ||
                          (pooling == model::Pooling::kLast && i == n - 1);
        batch.Add(tokens[i], static_cast<int32_t>(i), seq, want);
      }
      hidden.resize(static_cast<size_t>(batch.n_logits()) * n_embd);
      status = model_.model().ForwardHidden(ctx_, batch, *cache_, hidden);
      if (!status.ok()) return;
      for (int r = 0; r < batch.n_logits(); ++r) {
        for (int64_t j = 0; j < n_embd; ++j) sum[j] += hidden[r * n_embd + j];
      }
    });
    if (!ran.ok()) return ran;  // stopped: the slot goes with the scheduler
  }
  (void)RunOnEngine([&] {
    cache_->Truncate(seq, 0);
    slots_[static_cast<size_t>(seq)]->reserved = false;
  });
  wake_.notify_all();  // a queued request may take the slot now
  if (!status.ok()) return status;
  const double count = pooling == model::Pooling::kMean ? static_cast<double>(n) : 1.0;
  std::vector<float> out(static_cast<size_t>(n_embd));
  for (int64_t j = 0; j < n_embd; ++j) out[j] = static_cast<float>(sum[j] / count);
  return out;
}

void Scheduler::RunTasks() {
  std::deque<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task();
}

Status Scheduler::CheckSlotAction(int32_t id) const {
  if (id < 0 || id >= options_.n_parallel) {
    return InvalidArgument("slot " + std::to_string(id) + " does not exist (slots 0 to " +
                           std::to_string(options_.n_parallel - 1) + ")");
  }
  if (prefix_cache_ == nullptr) return Unsupported("the prefix cache is off (--cache-ram 0, or a model spread over ranks)");
  return Status::Ok();
}

Result<std::vector<SlotInfo>> Scheduler::Slots() {
  std::vector<SlotInfo> out;
  COHORT_RETURN_IF_ERROR(RunOnEngine([&] {
    for (const auto& slot : slots_) {
      out.push_back(SlotInfo{slot->id, slot->active || slot->reserved, static_cast<int32_t>(slot->saved_tokens.size())});
    }
  }));
  return out;
}

Result<std::vector<PrefixBlockData>> Scheduler::ExportSlot(int32_t id) {
  COHORT_RETURN_IF_ERROR(CheckSlotAction(id));
  std::vector<PrefixBlockData> blocks;
  COHORT_RETURN_IF_ERROR(RunOnEngine([&] { blocks = prefix_cache_->Export(slots_[id]->saved_tokens); }));
  return blocks;
}

Result<int32_t> Scheduler::ImportSlot(int32_t id, std::vector<PrefixBlockData> blocks) {
  COHORT_RETURN_IF_ERROR(CheckSlotAction(id));
  for (const PrefixBlockData& b : blocks) {
    if (static_cast<int>(b.tokens.size()) != prefix_cache_->block_tokens() ||
        static_cast<int64_t>(b.rows.size()) != prefix_cache_->block_bytes() ||
        (!b.state.empty() && static_cast<int64_t>(b.state.size()) != prefix_cache_->state_bytes())) {
      return InvalidArgument("a block does not have the prefix cache's sizes");
    }
  }
  if (static_cast<int64_t>(blocks.size()) * prefix_cache_->block_tokens() >= n_ctx_) {
    return OutOfRange("the saved prefix is longer than a slot's context");
  }
  int32_t held = 0;
  COHORT_RETURN_IF_ERROR(RunOnEngine([&] {
    held = prefix_cache_->Import(blocks);
    std::vector<int32_t>& tokens = slots_[id]->saved_tokens;
    tokens.clear();
    for (size_t i = 0; i < blocks.size() && static_cast<int32_t>(tokens.size()) < held; ++i) {
      tokens.insert(tokens.end(), blocks[i].tokens.begin(), blocks[i].tokens.end());
    }
    const PrefixCacheStats p = prefix_cache_->stats();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.prefix_cache_bytes = p.bytes;
    stats_.prefix_cache_blocks = p.blocks;
  }));
  return held;
}

Result<int32_t> Scheduler::EraseSlot(int32_t id) {
  COHORT_RETURN_IF_ERROR(CheckSlotAction(id));
  int32_t erased = 0;
  COHORT_RETURN_IF_ERROR(RunOnEngine([&] {
    std::vector<int32_t>& tokens = slots_[id]->saved_tokens;
    erased = static_cast<int32_t>(tokens.size());
    (void)prefix_cache_->Erase(tokens);
    tokens.clear();
    const PrefixCacheStats p = prefix_cache_->stats();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.prefix_cache_bytes = p.bytes;
    stats_.prefix_cache_blocks = p.blocks;
  }));
  return erased;
}

void Scheduler::StartSlot(Slot& slot, Queued&& queued) {
  slot.request = std::move(queued.request);
  slot.handle = std::move(queued.handle);
  const tokenizer::Tokenizer& tok = model_.tokenizer();
  slot.sampler = std::make_unique<Sampler>(EffectiveSampling(slot.request.options, tok),
                                           model_.config().n_vocab);
  for (int32_t id : slot.request.prompt) slot.sampler->Accept(id);
  if (slot.request.options.grammar != nullptr) {
    slot.sampler->SetGrammar(std::make_unique<GrammarMatcher>(slot.request.options.grammar, model_.grammar_vocab()));
  }
  slot.step.emplace(tok, slot.request.options, slot.n_prompt(), n_ctx_);
  slot.next_token = -1;
  slot.logits_row = -1;
  slot.generated.clear();
  slot.active = true;
  cache_->Truncate(slot.id, 0);
  // The longest cached prefix, leaving at least the prompt's last token to compute: its
  // logits give the first sampled token.
  slot.n_cached = 0;
  if (prefix_cache_ != nullptr) {
    slot.n_cached = prefix_cache_->Restore(slot.request.prompt, slot.n_prompt() - 1, *cache_, slot.id);
  }
  slot.n_fed = static_cast<size_t>(slot.n_cached);
  PlanCheckpoints(slot);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests_admitted;
  ++stats_.slots_active;
  stats_.prompt_tokens_cached += static_cast<uint64_t>(slot.n_cached);
  if (prefix_cache_ != nullptr) {
    const PrefixCacheStats p = prefix_cache_->stats();
    stats_.prefix_cache_lookups = p.lookups;
    stats_.prefix_cache_hits = p.hits;
  }
}

void Scheduler::PlanCheckpoints(Slot& slot) {
  slot.checkpoint_plan.clear();
  slot.checkpoints.clear();
  slot.latest.positions = 0;
  if (prefix_cache_ == nullptr || prefix_cache_->state_bytes() == 0) return;
  const int block = prefix_cache_->block_tokens();
  const int matched = prefix_cache_->Match(slot.request.prompt, slot.n_prompt() - 1);
  const int last_block = (slot.n_prompt() - 1) / block * block;
  for (int pos : {matched, last_block}) {
    if (pos > slot.n_cached) slot.checkpoint_plan.push_back(pos);
  }
  std::sort(slot.checkpoint_plan.begin(), slot.checkpoint_plan.end());
  slot.checkpoint_plan.erase(std::unique(slot.checkpoint_plan.begin(), slot.checkpoint_plan.end()),
                             slot.checkpoint_plan.end());
}

void Scheduler::KeepStates() {
  if (prefix_cache_ == nullptr || prefix_cache_->state_bytes() == 0) return;
  const int block = prefix_cache_->block_tokens();
  const auto bytes = static_cast<size_t>(prefix_cache_->state_bytes());
  for (auto& s : slots_) {
    Slot& slot = *s;
    const int length = cache_->length(slot.id);
    if (!slot.active || length % block != 0 || length <= slot.n_cached) continue;
    const bool planned = std::binary_search(slot.checkpoint_plan.begin(), slot.checkpoint_plan.end(), length);
    // A slot whose prompt waited this step still stands where it stood: kept already.
    const int kept = planned ? (slot.checkpoints.empty() ? 0 : slot.checkpoints.back().positions) : slot.latest.positions;
    if (kept == length) continue;
    StateCheckpoint& keep = planned ? slot.checkpoints.emplace_back() : slot.latest;
    keep.positions = length;
    keep.state.resize(bytes);  // the latest's buffer is reused: no allocation while decoding
    cache_->sequence_state()->ReadSeq(slot.id, keep.state.data());
  }
}

void Scheduler::SaveSlot(Slot& slot) {
  if (prefix_cache_ == nullptr) return;
  // Positions [0, length) hold the prompt and then every sampled token but the newest.
  std::vector<int32_t> tokens(slot.request.prompt.begin(), slot.request.prompt.end());
  tokens.insert(tokens.end(), slot.generated.begin(), slot.generated.end());
  tokens.resize(std::min(tokens.size(), static_cast<size_t>(cache_->length(slot.id))));
  if (slot.latest.positions > 0) slot.checkpoints.push_back(std::move(slot.latest));
  slot.latest = StateCheckpoint{};
  prefix_cache_->Save(tokens, *cache_, slot.id, slot.checkpoints);
  slot.checkpoints.clear();
  slot.saved_tokens = std::move(tokens);
  const PrefixCacheStats p = prefix_cache_->stats();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.prefix_cache_bytes = p.bytes;
  stats_.prefix_cache_blocks = p.blocks;
}

void Scheduler::BuildBatch() {
  batch_.Clear();
  int rows = 0;
  // Decoding sequences first: one token each, so streams advance every step.
  for (auto& s : slots_) {
    Slot& slot = *s;
    slot.logits_row = -1;
    if (!slot.active || slot.next_token < 0) continue;
    batch_.Add(slot.next_token, slot.n_prompt() + slot.step->n_generated() - 1, slot.id, true);
    slot.logits_row = rows++;
  }
  // Then prompt chunks in the room left, so a new request's first token does not wait for
  // the others to finish.
  // Beside decoding streams a step takes at most prefill_chunk_ prompt tokens, so their next
  // token is not held up by a long prompt; a prompt alone takes all of n_batch.
  const int n_decode = rows;
  const int64_t budget = static_cast<int64_t>(options_.n_batch) - n_decode;
  int64_t limit = n_decode > 0 ? std::min<int64_t>(budget, prefill_chunk_) : budget;
  // A measured chunk is sized against what the streams' step alone costs, and that grows with
  // their contexts while a long prompt is fed beside them and no step is theirs alone: left
  // stale, the growth is charged to the prompt's tokens and the chunk shrinks to one token
  // (a 4,000-token prompt then took five minutes). So every kProbeEvery-th such step is the
  // streams' alone, which measures it afresh (and gives them a cheap step).
  constexpr int kProbeEvery = 16;
  if (options_.prefill_chunk == 0 && n_decode > 0 && mixed_steps_ >= kProbeEvery) limit = 0;
  uint64_t prompt_tokens = 0;
  for (auto& s : slots_) {
    Slot& slot = *s;
    if (!slot.active || slot.next_token >= 0) continue;
    const int64_t room = limit - static_cast<int64_t>(prompt_tokens);
    if (room <= 0) break;
    const size_t n = slot.request.prompt.size();
    size_t end = std::min(n, slot.n_fed + static_cast<size_t>(room));
    // A chunk ends at a planned checkpoint, so the state there can be kept (KeepStates).
    for (int32_t pos : slot.checkpoint_plan) {
      if (static_cast<size_t>(pos) > slot.n_fed && static_cast<size_t>(pos) < end) {
        end = static_cast<size_t>(pos);
        break;
      }
    }
    for (size_t i = slot.n_fed; i < end; ++i) {
      batch_.Add(slot.request.prompt[i], static_cast<int32_t>(i), slot.id, i + 1 == n);
    }
    prompt_tokens += end - slot.n_fed;
    slot.n_fed = end;
    if (end == n) slot.logits_row = rows++;
  }
  last_decode_ = n_decode;
  last_prompt_ = static_cast<int>(prompt_tokens);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.prompt_tokens += prompt_tokens;
  if (!batch_.tokens.empty()) ++stats_.forward_passes;
}

void Scheduler::MeasureStep(double seconds, int n_decode, int n_prompt) {
  if (options_.prefill_chunk > 0) return;
  // A step costs roughly a fixed part (reading the weights, shared by the batch) plus a part
  // per token; a prompt token's share is what the step took beyond a decode-only step. Both
  // are moving averages, so the chunk follows the machine's load and the context's growth.
  constexpr double kKeep = 0.8;
  // A prompt token beside decoding streams costs at most this many times its share of a
  // prompt computed alone (a big batch, the kernels' best case; small batches are dearer).
  constexpr double kMixedOverAlone = 2.0;
  constexpr int kAloneMinTokens = 16;  // a prompt-alone step this big says what a token costs
  if (n_prompt == 0) {
    if (n_decode == 0) return;
    // A probe after mixed steps (BuildBatch) weighs more: the streams' cost has moved since.
    const double keep = mixed_steps_ > 0 ? 0.5 : kKeep;
    mixed_steps_ = 0;
    decode_step_s_ = decode_step_s_ > 0.0 ? keep * decode_step_s_ + (1 - keep) * seconds : seconds;
  } else if (n_decode == 0) {
    // Only steps beside decoding streams size the chunk directly: a prompt alone runs in big
    // batches, whose cost per token is lower than a small chunk's. It bounds it, below.
    if (n_prompt < kAloneMinTokens) return;
    const double per_token = seconds / n_prompt;
    prompt_alone_s_ = prompt_alone_s_ > 0.0 ? kKeep * prompt_alone_s_ + (1 - kKeep) * per_token : per_token;
  } else {
    ++mixed_steps_;
    if (decode_step_s_ <= 0.0) return;
    double per_token = std::max(seconds - decode_step_s_, seconds * 0.05) / n_prompt;
    // On a busy machine one step can take several times its cost (another process held the
    // core), and with a chunk of a few tokens that stall is all the sample measures: unclipped,
    // one stall shrinks the chunk to a token, where the steps' noise rather than the prompt's
    // cost sets it, and it stays there (a 4,000-token prompt then took 290 s instead of ~60).
    // So one sample moves the average by at most a factor of 2.
    if (prompt_token_s_ > 0.0) per_token = std::clamp(per_token, prompt_token_s_ / 2, prompt_token_s_ * 2);
    prompt_token_s_ = prompt_token_s_ > 0.0 ? kKeep * prompt_token_s_ + (1 - kKeep) * per_token : per_token;
  }
  if (prompt_alone_s_ > 0.0 && prompt_token_s_ > 0.0) {
    prompt_token_s_ = std::min(prompt_token_s_, kMixedOverAlone * prompt_alone_s_);
  }
  if (decode_step_s_ <= 0.0 || prompt_token_s_ <= 0.0) return;
  const double allowed = (options_.prefill_step_factor - 1.0) * decode_step_s_ / prompt_token_s_;
  prefill_chunk_ = static_cast<int32_t>(std::clamp<double>(allowed, 1.0, options_.n_batch));
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.prefill_chunk = prefill_chunk_;
}

void Scheduler::SampleSlot(Slot& slot, std::span<const float> logits) {
  const GenerateOptions& options = slot.request.options;
  const bool want_logprobs = options.top_logprobs >= 0;
  slot.logprobs = Logprobs{};
  slot.sampled = slot.sampler->Sample(logits, want_logprobs ? &slot.logprobs : nullptr, options.top_logprobs);
  slot.sampler->AcceptSampled(slot.sampled);
}

void Scheduler::StepSlot(Slot& slot) {
  RequestOutput out;
  const int32_t token = slot.sampled;
  slot.generated.push_back(token);
  out.tokens.push_back(token);
  if (slot.request.options.top_logprobs >= 0) out.logprobs.push_back(std::move(slot.logprobs));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.completion_tokens;
  }
  const TextOut append = [&out](std::string_view text) { out.text.append(text); };
  std::optional<FinishReason> end = slot.step->Push(token, append);
  if (!end && slot.sampler->grammar_done()) end = FinishReason::kEos;
  if (!end) {
    slot.next_token = token;
    out.prompt_tokens = slot.n_prompt();
    out.cached_tokens = slot.n_cached;
    out.completion_tokens = slot.step->n_generated();
    slot.handle->Post(std::move(out));
    return;
  }
  const FinishReason reason = slot.step->Finish(*end, append);
  FinishSlot(slot, reason, std::move(out));
}

void Scheduler::FinishSlot(Slot& slot, FinishReason reason, RequestOutput&& out, Status status) {
  out.done = true;
  out.status = std::move(status);
  out.finish_reason = reason;
  out.stop_index = slot.step->stop_index();
  out.prompt_tokens = slot.n_prompt();
  out.cached_tokens = slot.n_cached;
  out.completion_tokens = slot.step->n_generated();
  // Rows a failed forward left behind are not trusted; any other end keeps them.
  if (out.status.ok()) SaveSlot(slot);
  // Free the slot and count it before the caller hears of the end, so what it reads next
  // (stats, /metrics) already shows the slot free.
  std::shared_ptr<RequestHandle> handle = std::move(slot.handle);
  slot.active = false;
  slot.next_token = -1;
  slot.logits_row = -1;
  cache_->Truncate(slot.id, 0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.requests_finished;
    if (reason == FinishReason::kCancelled) ++stats_.requests_cancelled;
    --stats_.slots_active;
  }
  handle->Post(std::move(out));
}

void Scheduler::ProcessLogits() {
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  std::vector<Slot*>& sampling = sampling_;
  sampling.clear();
  for (auto& s : slots_) {
    if (s->active && s->logits_row >= 0) sampling.push_back(s.get());
  }
  auto sample = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      Slot& slot = *sampling[static_cast<size_t>(i)];
      SampleSlot(slot, std::span<const float>(logits_.data() + slot.logits_row * n_vocab, n_vocab));
    }
  };
  // Each slot's sampler, RNG and logits row are its own, so slots sample independently and
  // the tokens do not depend on which thread drew them; only the bookkeeping after it (text,
  // stop strings, the handles, the stats) stays on this thread, in slot order.
  if (sampling.size() > 1 && ctx_.pool->size() > 1) {
    ctx_.pool->ParallelFor(static_cast<int64_t>(sampling.size()), sample);
  } else {
    sample(0, static_cast<int64_t>(sampling.size()));
  }
  for (Slot* slot : sampling) StepSlot(*slot);
}

void Scheduler::FailAll(const Status& status) {
  for (auto& s : slots_) {
    if (s->active) FinishSlot(*s, FinishReason::kCancelled, RequestOutput{}, status);
  }
}

void Scheduler::Loop() {
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  while (Admit()) {
    for (auto& s : slots_) {
      if (s->active && s->handle->cancelled()) FinishSlot(*s, FinishReason::kCancelled, {});
    }
    BuildBatch();
    if (batch_.tokens.empty()) continue;
    const size_t n_rows = static_cast<size_t>(batch_.n_logits());
    const auto started = std::chrono::steady_clock::now();
    const Status status = model_.model().Forward(
        ctx_, batch_, *cache_, std::span<float>(logits_.data(), n_rows * n_vocab));
    MeasureStep(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                last_decode_, last_prompt_);
    if (!status.ok()) {
      if (ctx_.log != nullptr) ctx_.log->Error("scheduler: forward failed: {}", status.ToString());
      // 503 for the client: the request was fine, the model could not run it.
      const Status failed = Unavailable("the model failed: " + status.ToString());
      FailAll(failed);
      if (options_.stop_on_forward_error) {
        {
          std::lock_guard<std::mutex> lock(mutex_);
          failure_ = failed;
        }
        FailQueued(failed);
      }
      continue;
    }
    KeepStates();  // before a slot that ends this step saves its rows
    ProcessLogits();
  }
  const Status gone = Unavailable("the server is shutting down");
  FailAll(gone);
  FailQueued(gone);
  RunTasks();  // none is queued after stopping_: their callers wake
}

void Scheduler::FailQueued(const Status& status) {
  std::deque<Queued> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(queue_);
    stats_.queue_depth = 0;
  }
  for (Queued& q : left) {
    RequestOutput out;
    out.done = true;
    out.status = status;
    out.finish_reason = FinishReason::kCancelled;
    q.handle->Post(std::move(out));
  }
}

}  // namespace cohort::engine
