// Executor; see executor.h.
#include "parallel/executor.h"

#include <algorithm>

#include <fmt/format.h>

#include "comm/all_reduce.h"
#include "comm/broadcast.h"
#include "comm/gather.h"
#include "comm/point_to_point.h"
#include "parallel/model_plan.h"
#include "parallel/subgroup.h"

namespace cohort::parallel {
namespace {

constexpr uint32_t kActivationTag = 1;  // hidden states from one stage to the next
constexpr uint32_t kLogitsTag = 2;      // the last stage's logits to rank 0

// Joins a tensor-parallel group's partial sums with the comm all-reduce.
class GroupReducer final : public model::PartialSumReducer {
 public:
  explicit GroupReducer(comm::Communicator& group) : group_(group) {}
  Status Reduce(std::span<float> data) override { return comm::AllReduceSum(group_, data); }

 private:
  comm::Communicator& group_;
};

template <typename T>
std::span<std::byte> Bytes(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

}  // namespace

Executor::Executor(std::unique_ptr<model::Model> model, const plan::ShardPlan& plan,
                   comm::Communicator& world, const ExecutorOptions& options)
    : model_(std::move(model)), plan_(plan), world_(world), options_(options) {}

Executor::~Executor() {
  if (rank() == 0) (void)Stop();  // checks stopped_ under the step mutex
  EndKeepAlive();
}

Result<std::unique_ptr<Executor>> Executor::Create(std::unique_ptr<model::Model> model,
                                                   const plan::ShardPlan& plan, comm::Communicator& world,
                                                   const ExecutorOptions& options) {
  std::unique_ptr<Executor> e(new Executor(std::move(model), plan, world, options));
  COHORT_RETURN_IF_ERROR(e->Init());
  return e;
}

Status Executor::Init() {
  decoder_ = dynamic_cast<model::Decoder*>(model_.get());
  if (decoder_ == nullptr) return Unsupported("the executor runs decoder models only");
  COHORT_RETURN_IF_ERROR(plan_.Validate());
  if (plan_.n_ranks() != world_.size()) {
    return InvalidArgument(fmt::format("the plan has {} ranks, the group {}", plan_.n_ranks(),
                                       world_.size()));
  }
  const model::ModelConfig& c = decoder_->config();
  if (plan_.shape.n_layer != c.n_layer || plan_.shape.n_vocab != c.n_vocab ||
      plan_.shape.n_head != c.n_head || plan_.shape.n_embd != c.n_embd) {
    return InvalidArgument("the plan was made for another model shape");
  }
  COHORT_ASSIGN_OR_RETURN(model::StageShard shard, StageShardOf(plan_, rank()));
  COHORT_RETURN_IF_ERROR(decoder_->SetStageShard(shard).Annotate(fmt::format("rank {}", rank())));
  // The rank's slices get memory of their own and the mapped pages are released, so the
  // rank's resident memory is its share (see OwnedSlices).
  const plan::RankShard& me = plan_.Rank(rank());
  COHORT_ASSIGN_OR_RETURN(copied_bytes_,
                          decoder_->CopyShardWeights(me.embd_rows.begin, me.embd_rows.end,
                                                     me.output_rows.begin, me.output_rows.end));
  stage_ = plan_.StageOf(rank());
  for (const plan::StagePlan& s : plan_.stages) stage_first_rank_.push_back(s.ranks.front().rank);
  std::vector<int> members;
  for (const plan::RankShard& r : plan_.stages[stage_].ranks) members.push_back(r.rank);
  if (members.size() > 1) {
    group_ = std::make_unique<comm::Communicator>(
        std::make_unique<SubgroupTransport>(world_.transport(), members), world_.options());
    reducer_ = std::make_unique<GroupReducer>(*group_);
  }
  if (rank() == 0 && world_.size() > 1) {
    last_sent_ = std::chrono::steady_clock::now();
    keepalive_ = std::thread([this] { KeepAliveLoop(); });
  }
  return Status::Ok();
}

void Executor::KeepAliveLoop() {
  std::unique_lock lock(step_mutex_);
  while (!keepalive_quit_ && !stopped_) {
    const auto due = last_sent_ + options_.keepalive_interval;
    if (std::chrono::steady_clock::now() < due) {
      keepalive_wake_.wait_until(lock, due);
      continue;
    }
    StepHeader h;
    h.command = StepCommand::kKeepAlive;
    std::array<std::byte, StepHeader::kBytes> bytes;
    h.Encode(bytes);
    const Status st = comm::Broadcast(world_, 0, bytes);
    last_sent_ = std::chrono::steady_clock::now();
    if (!st.ok()) {
      keepalive_failure_ = st.Annotate("keeping the idle workers");
      stopped_ = true;  // the ranks may be out of step: the group is unusable from now on
    }
  }
}

void Executor::EndKeepAlive() {
  if (!keepalive_.joinable()) return;
  {
    std::lock_guard lock(step_mutex_);
    keepalive_quit_ = true;
  }
  keepalive_wake_.notify_all();
  keepalive_.join();
}

Result<std::unique_ptr<model::KvCache>> Executor::NewKvCache(
    const model::KvCacheOptions& options) const {
  return decoder_->NewKvCache(options);
}

Status Executor::Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                         std::span<float> logits) {
  return Step(ctx, batch, cache, logits, StepCommand::kForward);
}

Status Executor::ForwardHidden(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                               std::span<float> hidden) {
  return Step(ctx, batch, cache, hidden, StepCommand::kHidden);
}

Status Executor::Step(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                      std::span<float> out, StepCommand command) {
  if (rank() != 0) return InvalidArgument("only rank 0 (the coordinator) calls Forward");
  std::lock_guard lock(step_mutex_);
  if (!keepalive_failure_.ok()) return keepalive_failure_;
  if (stopped_) return InvalidArgument("the executor was stopped");
  COHORT_RETURN_IF_ERROR(decoder_->CheckStageBatch(batch, cache));
  const bool hidden = command == StepCommand::kHidden;
  const size_t need = static_cast<size_t>(batch.n_logits()) * (hidden ? config().n_embd : config().n_vocab);
  if (out.size() < need) {
    return InvalidArgument(fmt::format("output buffer holds {} floats, batch needs {}", out.size(), need));
  }
  StepHeader h;
  h.command = command;
  h.n_tokens = static_cast<uint32_t>(batch.size());
  h.n_seq = static_cast<uint32_t>(cache.n_seq());
  h.n_ctx = static_cast<uint32_t>(cache.n_ctx());
  h.kv_type = cache.type();
  h.n_block_ops = static_cast<uint32_t>(block_ops_.size());
  lengths_.resize(h.n_seq);
  for (int s = 0; s < cache.n_seq(); ++s) lengths_[s] = cache.length(s);
  message_.resize(std::max(StepHeader::kBytes, h.PayloadBytes()));
  h.Encode(std::span<std::byte, StepHeader::kBytes>(message_.data(), StepHeader::kBytes));
  Status st = comm::Broadcast(world_, 0, std::span(message_.data(), StepHeader::kBytes));
  if (st.ok()) {
    const std::span<std::byte> payload(message_.data(), h.PayloadBytes());
    EncodePayload(batch, lengths_, block_ops_, payload);
    st = comm::Broadcast(world_, 0, payload);
    block_ops_.clear();  // sent, or the group is unusable
  }
  if (st.ok()) st = RunStep(ctx, batch, cache, out, hidden);
  last_sent_ = std::chrono::steady_clock::now();
  // A failed step leaves the ranks out of step for good: the group is unusable from now on.
  if (!st.ok()) stopped_ = true;
  return st.Annotate("distributed forward");
}

void Executor::QueueBlockOp(const BlockOp& op) {
  COHORT_CHECK_EQ(rank(), 0);
  std::lock_guard lock(step_mutex_);
  block_ops_.push_back(op);
}

void Executor::Keep(uint64_t id, int seq, int pos, int n) { QueueBlockOp({BlockOpKind::kKeep, seq, pos, n, id}); }
void Executor::Load(uint64_t id, int seq, int pos) { QueueBlockOp({BlockOpKind::kLoad, seq, pos, 0, id}); }
void Executor::Drop(uint64_t id) { QueueBlockOp({BlockOpKind::kDrop, 0, 0, 0, id}); }

Status Executor::Stop() {
  if (rank() != 0) return InvalidArgument("only rank 0 (the coordinator) stops the workers");
  Status st;
  {
    std::lock_guard lock(step_mutex_);
    if (stopped_) return Status::Ok();
    stopped_ = true;
    StepHeader h;
    h.command = StepCommand::kStop;
    std::array<std::byte, StepHeader::kBytes> bytes;
    h.Encode(bytes);
    st = comm::Broadcast(world_, 0, bytes).Annotate("stopping the workers");
  }
  EndKeepAlive();
  return st;
}

Status Executor::Serve(const Context& ctx) {
  if (rank() == 0) return InvalidArgument("rank 0 is the coordinator; workers serve");
  std::array<std::byte, StepHeader::kBytes> bytes;
  for (;;) {
    const Status heard = comm::Broadcast(world_, 0, bytes, {options_.idle_timeout});
    if (heard.code() == StatusCode::kTimeout) {
      return Timeout(fmt::format("rank {}: no word from the coordinator for {} ms (no step, no "
                                 "keep-alive: its process or its link is gone); leaving the job",
                                 rank(), options_.idle_timeout.count()));
    }
    COHORT_RETURN_IF_ERROR(heard.Annotate("waiting for the coordinator"));
    COHORT_ASSIGN_OR_RETURN(StepHeader h, StepHeader::Decode(bytes));
    if (h.command == StepCommand::kStop) return Status::Ok();
    if (h.command == StepCommand::kKeepAlive) continue;
    message_.resize(h.PayloadBytes());
    COHORT_RETURN_IF_ERROR(comm::Broadcast(world_, 0, message_).Annotate("receiving a step"));
    COHORT_RETURN_IF_ERROR(DecodePayload(h, message_, &payload_));
    COHORT_RETURN_IF_ERROR(SyncCache(h, payload_));
    COHORT_RETURN_IF_ERROR(decoder_->CheckStageBatch(payload_.batch, *worker_cache_));
    COHORT_RETURN_IF_ERROR(RunStep(ctx, payload_.batch, *worker_cache_, {}, h.command == StepCommand::kHidden)
                               .Annotate(fmt::format("rank {} step", rank())));
  }
}

Status Executor::SyncCache(const StepHeader& h, const StepPayload& payload) {
  const bool same = worker_cache_ != nullptr && worker_cache_->n_ctx() == static_cast<int>(h.n_ctx) &&
                    worker_cache_->n_seq() == static_cast<int>(h.n_seq) &&
                    worker_cache_->type() == h.kv_type;
  if (!same) {
    model::KvCacheOptions o;
    o.n_ctx = static_cast<int>(h.n_ctx);
    o.n_seq = static_cast<int>(h.n_seq);
    o.type = h.kv_type;
    COHORT_ASSIGN_OR_RETURN(worker_cache_, decoder_->NewKvCache(o));
    blocks_.clear();  // rows of another cache's layout; a later use of one is refused
  }
  for (const BlockOp& op : payload.block_ops) COHORT_RETURN_IF_ERROR(ApplyBlockOp(op));
  const std::span<const int32_t> lengths = payload.cache_lengths;
  for (int s = 0; s < worker_cache_->n_seq(); ++s) {
    if (worker_cache_->length(s) < lengths[s]) {
      return InvalidArgument(fmt::format("rank {}: sequence {} holds {} positions, the "
                                         "coordinator's cache {} (was the cache replaced?)",
                                         rank(), s, worker_cache_->length(s), lengths[s]));
    }
    worker_cache_->Truncate(s, lengths[s]);
  }
  return Status::Ok();
}

Status Executor::ApplyBlockOp(const BlockOp& op) {
  model::KvCache& cache = *worker_cache_;
  auto held = blocks_.find(op.id);
  if (op.kind == BlockOpKind::kKeep) {
    if (held != blocks_.end()) return Corrupt(fmt::format("rank {}: prefix block {} is already held", rank(), op.id));
    if (op.pos + op.n > cache.length(op.seq)) {
      return Corrupt(fmt::format("rank {}: prefix block {} wants positions {}..{} of sequence {}, which holds {}",
                                 rank(), op.id, op.pos, op.pos + op.n, op.seq, cache.length(op.seq)));
    }
    HeldBlock& b = blocks_[op.id];
    b.n = op.n;
    b.rows.resize(static_cast<size_t>(cache.RowsBytes(op.n)));
    cache.ReadRows(op.seq, op.pos, op.n, b.rows.data());
    return Status::Ok();
  }
  if (held == blocks_.end()) return Corrupt(fmt::format("rank {}: prefix block {} is not held", rank(), op.id));
  if (op.kind == BlockOpKind::kDrop) {
    blocks_.erase(held);
    return Status::Ok();
  }
  const HeldBlock& b = held->second;
  if (op.pos > cache.length(op.seq) || op.pos + b.n > cache.n_ctx()) {
    return Corrupt(fmt::format("rank {}: prefix block {} cannot go to position {} of sequence {} (it holds {})", rank(),
                               op.id, op.pos, op.seq, cache.length(op.seq)));
  }
  cache.Truncate(op.seq, op.pos);
  cache.WriteRows(op.seq, op.pos, b.n, b.rows.data());
  return Status::Ok();
}

Status Executor::RunStep(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                         std::span<float> logits, bool hidden) {
  const int64_t n_embd = config().n_embd;
  x_.resize(batch.size() * n_embd);
  const bool pipelined = plan_.n_stages() > 1;
  SplitMicroBatches(static_cast<int64_t>(batch.size()), pipelined ? options_.micro_batch_tokens : 0,
                    &micro_);
  for (const TokenRange& range : micro_) {
    const bool whole = micro_.size() == 1;
    if (!whole) SliceBatch(batch, range, &part_);
    COHORT_RETURN_IF_ERROR(
        RunMicroBatch(ctx, whole ? batch : part_, cache, x_.data() + range.begin * n_embd));
  }
  if (stage_ + 1 < plan_.n_stages()) {
    if (rank() == 0 && batch.n_logits() > 0) {
      const size_t n = static_cast<size_t>(batch.n_logits()) * (hidden ? config().n_embd : config().n_vocab);
      return comm::RecvFrom(world_, stage_first_rank_.back(),
                            std::as_writable_bytes(logits.first(n)), kLogitsTag)
          .Annotate(hidden ? "receiving hidden states from the last stage" : "receiving logits from the last stage");
    }
    return Status::Ok();
  }
  return hidden ? LeaveWithHidden(batch, logits) : LeaveLastStage(ctx, batch, logits);
}

// The last stage's ranks all hold the whole hidden states (each block's partial sums were
// all-reduced), so its first rank normalizes them alone and sends them to rank 0.
Status Executor::LeaveWithHidden(const model::Batch& batch, std::span<float> hidden) {
  const int n_out = batch.n_logits();
  if (n_out == 0 || rank() != stage_first_rank_[stage_]) return Status::Ok();
  if (rank() == 0) {
    decoder_->NormOutputRows(batch, x_.data(), hidden.data());
    return Status::Ok();
  }
  full_logits_.resize(static_cast<size_t>(n_out) * config().n_embd);
  decoder_->NormOutputRows(batch, x_.data(), full_logits_.data());
  return comm::SendTo(world_, 0, Bytes(full_logits_), kLogitsTag).Annotate("sending hidden states");
}

Status Executor::RunMicroBatch(const Context& ctx, const model::Batch& part, model::KvCache& cache,
                               float* x) {
  COHORT_RETURN_IF_ERROR(EnterStage(part, x));
  COHORT_RETURN_IF_ERROR(decoder_->RunLayers(ctx, part, cache, x, reducer_.get()));
  if (stage_ + 1 == plan_.n_stages() || rank() != stage_first_rank_[stage_]) return Status::Ok();
  // The send returns once the next stage takes the bytes, at the latest when it has finished
  // the micro-batch before: that is the pipeline's rhythm, and this stage runs ahead by one.
  const std::span<const float> out(x, part.size() * config().n_embd);
  return comm::SendTo(world_, stage_first_rank_[stage_ + 1], std::as_bytes(out), kActivationTag)
      .Annotate(fmt::format("sending activations to stage {}", stage_ + 1));
}

Status Executor::EnterStage(const model::Batch& part, float* x) {
  const std::span<float> states(x, part.size() * config().n_embd);
  if (stage_ == 0) {
    const plan::Range rows = plan_.Rank(rank()).embd_rows;
    decoder_->EmbedRows(part, rows.begin, rows.end, x);
    if (group_ == nullptr) return Status::Ok();
    return comm::AllReduceSum(*group_, states).Annotate("summing the split embedding");
  }
  if (rank() == stage_first_rank_[stage_]) {
    COHORT_RETURN_IF_ERROR(comm::RecvFrom(world_, stage_first_rank_[stage_ - 1],
                                          std::as_writable_bytes(states), kActivationTag)
                               .Annotate(fmt::format("receiving activations from stage {}", stage_ - 1)));
  }
  if (group_ == nullptr) return Status::Ok();
  return comm::Broadcast(*group_, 0, std::as_writable_bytes(states))
      .Annotate("sharing activations in the stage");
}

Status Executor::LeaveLastStage(const Context& ctx, const model::Batch& batch,
                                std::span<float> logits) {
  const int n_out = batch.n_logits();
  if (n_out == 0) return Status::Ok();
  const int64_t n_vocab = config().n_vocab;
  const bool first_in_stage = rank() == stage_first_rank_[stage_];
  float* full = nullptr;
  if (first_in_stage) {
    if (rank() == 0) {
      full = logits.data();
    } else {
      full_logits_.resize(static_cast<size_t>(n_out) * n_vocab);
      full = full_logits_.data();
    }
  }
  if (group_ == nullptr) {
    const plan::Range mine = plan_.Rank(rank()).output_rows;
    decoder_->HeadRows(batch, ctx.pool, x_.data(), mine.begin, mine.end, full);
  } else {
    COHORT_RETURN_IF_ERROR(GatherHead(ctx, batch, full));
  }
  if (first_in_stage && rank() != 0) {
    return comm::SendTo(world_, 0, Bytes(full_logits_), kLogitsTag).Annotate("sending logits");
  }
  return Status::Ok();
}

// Every rank of the last stage computes its LM-head rows and the stage's first rank (group
// rank 0) gathers them: only it needs the logits, so a gather, not an all-gather. The plan
// tiles the vocabulary over the group in rank order, so with one row of logits the slices
// laid end to end are the row itself and land in place in `full`; with more rows each slice is
// [n_out][rows] and goes through head_all_, then row by row into `full`.
Status Executor::GatherHead(const Context& ctx, const model::Batch& batch, float* full) {
  const int n_out = batch.n_logits();
  const int64_t n_vocab = config().n_vocab;
  const auto& ranks = plan_.stages[stage_].ranks;
  const plan::Range mine = plan_.Rank(rank()).output_rows;
  const bool root = group_->rank() == 0;
  const bool in_place = n_out == 1;
  head_bytes_.clear();
  size_t offset = 0;  // floats before the next rank's slice in the gathered buffer
  size_t own_offset = 0;
  for (const plan::RankShard& r : ranks) {
    if (in_place) COHORT_CHECK_EQ(offset, static_cast<size_t>(r.output_rows.begin));
    if (r.rank == rank()) own_offset = offset;
    head_bytes_.push_back(static_cast<size_t>(n_out) * r.output_rows.size() * sizeof(float));
    offset += static_cast<size_t>(n_out) * r.output_rows.size();
  }
  // The root computes its own slice straight into its place in the gathered buffer.
  std::span<float> gathered;
  std::span<float> own;
  if (root) {
    if (in_place) {
      gathered = std::span(full, offset);
    } else {
      head_all_.resize(offset);
      gathered = head_all_;
    }
    own = gathered.subspan(own_offset, static_cast<size_t>(n_out) * mine.size());
  } else {
    head_local_.resize(static_cast<size_t>(n_out) * mine.size());
    own = head_local_;
  }
  decoder_->HeadRows(batch, ctx.pool, x_.data(), mine.begin, mine.end, own.data());
  COHORT_RETURN_IF_ERROR(comm::Gather(*group_, 0, std::as_bytes(own), head_bytes_,
                                      std::as_writable_bytes(gathered))
                             .Annotate("gathering logits"));
  if (!root || in_place) return Status::Ok();
  const float* slice = head_all_.data();
  for (const plan::RankShard& r : ranks) {
    const plan::Range rows = r.output_rows;
    for (int t = 0; t < n_out; ++t) {
      const float* src = slice + static_cast<size_t>(t) * rows.size();
      std::copy(src, src + rows.size(), full + t * n_vocab + rows.begin);
    }
    slice += static_cast<size_t>(n_out) * rows.size();
  }
  return Status::Ok();
}

}  // namespace cohort::parallel
