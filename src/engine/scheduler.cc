// The engine thread of continuous batching: admit queued requests into free slots, build one
// batch from every slot's next token and chunks of pending prompts, run Forward, sample each
// slot from its own logits row, and hand text to the requests' handles.
#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "engine/stop.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace cohort::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

}  // namespace

// One sequence slot of the KV cache and the request generating in it.
struct Scheduler::Slot {
  int32_t id = 0;
  bool active = false;
  std::shared_ptr<RequestHandle> handle;
  ScheduledRequest request;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<tokenizer::StreamDecoder> decoder;
  std::unique_ptr<StopMatcher> stop;
  size_t n_fed = 0;          // prompt tokens already in the cache
  int32_t next_token = -1;   // sampled and not yet fed (-1: still in the prompt)
  int32_t n_generated = 0;
  int logits_row = -1;       // this step's row of logits_, or -1
  int32_t sampled = -1;      // this step's token, drawn by SampleSlot (maybe on a pool thread)
  Logprobs logprobs;         // and its logprobs, when the request wants them
  std::string clean;         // scratch: sanitized decoder output
  std::string shown;         // scratch: what the stop matcher releases

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

Status SchedulerOptions::Validate() const {
  if (n_parallel < 1 || n_parallel > 1024) return InvalidArgument("n_parallel must be in [1, 1024]");
  if (n_ctx < 0) return InvalidArgument("n_ctx must be >= 0 (0: the model's context)");
  if (max_queue < 0) return InvalidArgument("max_queue must be >= 0");
  // With n_batch >= n_parallel every step has room for at least one prompt token beside the
  // decoding sequences, so a new request always makes progress.
  if (n_batch < n_parallel) return InvalidArgument("n_batch must be >= n_parallel");
  if (kv_type != DType::kF32 && kv_type != DType::kF16) {
    return InvalidArgument("the KV cache type must be f32 or f16");
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_.ok()) return failure_;
    if (!started_ || stopping_) return Unavailable("the scheduler is not running");
  }
  COHORT_RETURN_IF_ERROR(CheckRequest(request));
  auto handle = std::make_shared<RequestHandle>();
  if (request.options.max_tokens == 0) {
    RequestOutput out;
    out.done = true;
    out.prompt_tokens = static_cast<int32_t>(request.prompt.size());
    handle->Post(std::move(out));
    return handle;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!started_ || stopping_) return Unavailable("the scheduler is not running");
    if (static_cast<int32_t>(queue_.size()) >= options_.max_queue) {
      return ResourceExhausted("the request queue is full (" + std::to_string(options_.max_queue) +
                               " waiting); try again later");
    }
    if (!failure_.ok()) return failure_;
    queue_.push_back(Queued{std::move(request), handle});
    stats_.queue_depth = static_cast<int32_t>(queue_.size());
  }
  wake_.notify_all();
  return handle;
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
  std::vector<Queued> admitted;
  std::vector<Slot*> free;
  bool any_active = false;
  for (auto& slot : slots_) {
    if (slot->active) {
      any_active = true;
    } else {
      free.push_back(slot.get());
    }
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || any_active; });
    if (stopping_) return false;
    while (!queue_.empty() && admitted.size() < free.size()) {
      admitted.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    stats_.queue_depth = static_cast<int32_t>(queue_.size());
  }
  for (size_t i = 0; i < admitted.size(); ++i) StartSlot(*free[i], std::move(admitted[i]));
  return true;
}

void Scheduler::StartSlot(Slot& slot, Queued&& queued) {
  slot.request = std::move(queued.request);
  slot.handle = std::move(queued.handle);
  SamplingParams params = slot.request.options.sampling;
  const tokenizer::Tokenizer& tok = model_.tokenizer();
  if (slot.request.options.ignore_eos) {
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.IsEndOfGeneration(id)) params.logit_bias[id] = kNegInf;
    }
  }
  slot.sampler = std::make_unique<Sampler>(params, model_.config().n_vocab);
  for (int32_t id : slot.request.prompt) slot.sampler->Accept(id);
  slot.decoder = std::make_unique<tokenizer::StreamDecoder>(tok);
  slot.stop = std::make_unique<StopMatcher>(slot.request.options.stop);
  slot.n_fed = 0;
  slot.next_token = -1;
  slot.n_generated = 0;
  slot.logits_row = -1;
  slot.active = true;
  cache_->Truncate(slot.id, 0);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests_admitted;
  ++stats_.slots_active;
}

void Scheduler::BuildBatch() {
  batch_.Clear();
  int rows = 0;
  // Decoding sequences first: one token each, so streams advance every step.
  for (auto& s : slots_) {
    Slot& slot = *s;
    slot.logits_row = -1;
    if (!slot.active || slot.next_token < 0) continue;
    batch_.Add(slot.next_token, slot.n_prompt() + slot.n_generated - 1, slot.id, true);
    slot.logits_row = rows++;
  }
  // Then prompt chunks in the room left, so a new request's first token does not wait for
  // the others to finish.
  uint64_t prompt_tokens = 0;
  for (auto& s : slots_) {
    Slot& slot = *s;
    if (!slot.active || slot.next_token >= 0) continue;
    const int64_t room = static_cast<int64_t>(options_.n_batch) - static_cast<int64_t>(batch_.size());
    if (room <= 0) break;
    const size_t n = slot.request.prompt.size();
    const size_t end = std::min(n, slot.n_fed + static_cast<size_t>(room));
    for (size_t i = slot.n_fed; i < end; ++i) {
      batch_.Add(slot.request.prompt[i], static_cast<int32_t>(i), slot.id, i + 1 == n);
    }
    prompt_tokens += end - slot.n_fed;
    slot.n_fed = end;
    if (end == n) slot.logits_row = rows++;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.prompt_tokens += prompt_tokens;
  if (!batch_.tokens.empty()) ++stats_.forward_passes;
}

void Scheduler::EmitText(Slot& slot, std::string_view piece, RequestOutput& out) {
  // Bytes the decoder released are final, so an invalid one will never become valid.
  slot.clean.clear();
  tokenizer::AppendSanitizedUtf8(piece, slot.clean);
  slot.shown.clear();
  slot.stop->Push(slot.clean, slot.shown);
  out.text.append(slot.shown);
}

void Scheduler::SampleSlot(Slot& slot, std::span<const float> logits) {
  const GenerateOptions& options = slot.request.options;
  const bool want_logprobs = options.top_logprobs >= 0;
  slot.logprobs = Logprobs{};
  slot.sampled = slot.sampler->Sample(logits, want_logprobs ? &slot.logprobs : nullptr, options.top_logprobs);
  slot.sampler->Accept(slot.sampled);
}

void Scheduler::StepSlot(Slot& slot) {
  const GenerateOptions& options = slot.request.options;
  RequestOutput out;
  const int32_t token = slot.sampled;
  ++slot.n_generated;
  out.tokens.push_back(token);
  if (options.top_logprobs >= 0) out.logprobs.push_back(std::move(slot.logprobs));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.completion_tokens;
  }
  std::optional<FinishReason> finish;
  if (!options.ignore_eos && model_.tokenizer().IsEndOfGeneration(token)) {
    finish = FinishReason::kEos;
  } else {
    EmitText(slot, slot.decoder->Push(token), out);
    if (slot.stop->stopped()) {
      finish = FinishReason::kStop;
    } else if (slot.n_generated >= options.max_tokens || slot.n_prompt() + slot.n_generated >= n_ctx_) {
      finish = FinishReason::kLength;
    }
  }
  if (!finish) {
    slot.next_token = token;
    out.prompt_tokens = slot.n_prompt();
    out.completion_tokens = slot.n_generated;
    slot.handle->Post(std::move(out));
    return;
  }
  // What the decoder and the matcher still hold is final now; a stop string may still
  // complete inside the decoder's held-back bytes.
  if (*finish != FinishReason::kStop) {
    EmitText(slot, slot.decoder->Flush(), out);
    if (slot.stop->stopped()) {
      finish = FinishReason::kStop;
    } else {
      slot.stop->Flush(out.text);
    }
  }
  FinishSlot(slot, *finish, std::move(out));
}

void Scheduler::FinishSlot(Slot& slot, FinishReason reason, RequestOutput&& out, Status status) {
  out.done = true;
  out.status = std::move(status);
  out.finish_reason = reason;
  out.stop_index = slot.stop->matched_index();
  out.prompt_tokens = slot.n_prompt();
  out.completion_tokens = slot.n_generated;
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
    const Status status = model_.model().Forward(
        ctx_, batch_, *cache_, std::span<float>(logits_.data(), n_rows * n_vocab));
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
    ProcessLogits();
  }
  const Status gone = Unavailable("the server is shutting down");
  FailAll(gone);
  FailQueued(gone);
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
