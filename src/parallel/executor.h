// Executor: one rank's part of a model instance split by a ShardPlan. Every rank holds its own
// model restricted to its stage's layers and its share of each layer; the coordinator (rank 0)
// is a model::Model like a local one: its Forward broadcasts the step to the workers, computes
// its own share, and returns the whole logits. Workers run Serve() until told to stop.
//
// Per step: the first stage embeds (vocabulary split, then summed over its group), each stage
// runs its layers with an all-reduce after attention and after the FFN inside its
// tensor-parallel group, hands the hidden states to the next stage, and the last stage's
// ranks compute their slice of the LM head, gathered and sent to rank 0.
//
// Prefix cache: the coordinator is also the model's KvBlockReplicas. What its prefix cache
// did to blocks of rank 0's slice (keep, write back, forget) is queued and travels with the
// next step; each worker first does the same to its own slice, under the same block ids, then
// takes the step's cache lengths. The coordinator's cache decides; a worker holds exactly the
// blocks it was told to and refuses (ending the job) an operation that does not fit them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/communicator.h"
#include "core/context.h"
#include "core/status.h"
#include "model/decoder.h"
#include "model/kv_block_replicas.h"
#include "model/model.h"
#include "plan/shard_plan.h"
#include "parallel/micro_batch.h"
#include "parallel/step_message.h"

namespace cohort::parallel {

struct ExecutorOptions {
  // Worker: how long it waits for the coordinator's next message (a step or a keep-alive)
  // before it ends its job. A peer that dies is noticed at once regardless; this bounds a
  // coordinator that goes silent without closing its connections (its link cut, its process
  // stopped), so the worker frees its shard instead of holding it for good.
  std::chrono::milliseconds idle_timeout{10000};
  // Coordinator: after this long without a step it sends the workers a keep-alive, so an
  // alive but idle coordinator keeps them. Must stay well below the workers' idle_timeout.
  std::chrono::milliseconds keepalive_interval{1000};
  // Pipeline: a step of at least twice this many tokens (a prompt) runs through the stages in
  // micro-batches of about this size (micro_batch.h), so stage s+1 works on micro-batch i
  // while stage s works on i+1; each micro-batch still reads its whole stage's weights, so
  // much smaller ones cost weight traffic. Every rank must use the same value (a stage's
  // activations arrive per micro-batch); 0 sends whole steps. Ignored with one stage.
  int micro_batch_tokens = 128;
};

class Executor final : public model::Model, public model::KvBlockReplicas {
 public:
  // `world` connects the plan's ranks (world rank i is plan rank i) and must outlive the
  // executor. `model` is this rank's own model, loaded from the same file as everyone's; it is
  // restricted here to the rank's share.
  static Result<std::unique_ptr<Executor>> Create(std::unique_ptr<model::Model> model,
                                                  const plan::ShardPlan& plan, comm::Communicator& world,
                                                  const ExecutorOptions& options = {});
  ~Executor() override;

  int rank() const { return world_.rank(); }
  const plan::ShardPlan& plan() const { return plan_; }
  // Bytes of weight slices copied out of the mapping at creation (see OwnedSlices).
  int64_t copied_bytes() const { return copied_bytes_; }

  // model::Model, on the coordinator. The cache is rank 0's own share; the other ranks keep
  // theirs in step with it (its options and per-sequence lengths travel with every step).
  const model::ModelConfig& config() const override { return decoder_->config(); }
  Result<std::unique_ptr<model::KvCache>> NewKvCache(
      const model::KvCacheOptions& options) const override;
  Status Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits) override;
  // The final hidden states, from the last stage (a kHidden step).
  Status ForwardHidden(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                       std::span<float> hidden) override;

  // model::KvBlockReplicas, on the coordinator: queued for the next step (rank 0's own slice
  // is the caller's).
  void Keep(uint64_t id, int seq, int pos, int n) override;
  void Load(uint64_t id, int seq, int pos) override;
  void Drop(uint64_t id) override;
  // Worker: blocks of prefix rows held now (its slice of the coordinator's prefix cache).
  int64_t blocks_held() const { return static_cast<int64_t>(blocks_.size()); }

  // Coordinator: tells every worker to leave Serve(). Called by the destructor if needed.
  // Forward and Stop may be called from any thread (one at a time is enforced here).
  Status Stop();
  // Worker: runs steps until the coordinator stops it (Ok) or something fails.
  Status Serve(const Context& ctx);

 private:
  Executor(std::unique_ptr<model::Model> model, const plan::ShardPlan& plan, comm::Communicator& world,
           const ExecutorOptions& options);
  Status Init();
  // Forward and ForwardHidden: broadcasts the step (`command`) and runs it; `out` gets the logits
  // or the hidden states.
  Status Step(const Context& ctx, const model::Batch& batch, model::KvCache& cache, std::span<float> out,
              StepCommand command);
  // The step every rank runs; logits (hidden states when `hidden`) is non-empty on rank 0 only.
  Status RunStep(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits, bool hidden);
  // Embeds (first stage) or receives (later stages) the hidden states x[n_tokens][n_embd] of
  // one micro-batch, then shares them within the stage's tensor-parallel group.
  Status EnterStage(const model::Batch& part, float* x);
  // One micro-batch through this stage: in, the stage's layers, on to the next stage.
  Status RunMicroBatch(const Context& ctx, const model::Batch& part, model::KvCache& cache, float* x);
  Status LeaveLastStage(const Context& ctx, const model::Batch& batch, std::span<float> logits);
  Status LeaveWithHidden(const model::Batch& batch, std::span<float> hidden);
  Status GatherHead(const Context& ctx, const model::Batch& batch, float* full);
  // Worker: makes its cache match the coordinator's options, applies the step's block
  // operations, then takes the coordinator's lengths.
  Status SyncCache(const StepHeader& header, const StepPayload& payload);
  Status ApplyBlockOp(const BlockOp& op);
  void QueueBlockOp(const BlockOp& op);
  // Coordinator: the keep-alive thread's loop, and ending it.
  void KeepAliveLoop();
  void EndKeepAlive();

  std::unique_ptr<model::Model> model_;
  model::Decoder* decoder_ = nullptr;  // model_, as the decoder it is
  plan::ShardPlan plan_;
  comm::Communicator& world_;
  ExecutorOptions options_;
  int stage_ = 0;
  std::vector<int> stage_first_rank_;  // [stage] world rank of each stage's local rank 0
  std::unique_ptr<comm::Communicator> group_;  // this stage's tensor-parallel group
  std::unique_ptr<model::PartialSumReducer> reducer_;
  bool stopped_ = false;
  int64_t copied_bytes_ = 0;

  // Coordinator: one step (or keep-alive) on the group at a time. The keep-alive thread sends
  // when nothing went out for keepalive_interval; a keep-alive that fails (a worker gone while
  // idle) is kept in keepalive_failure_ and ends the group like a failed step.
  std::mutex step_mutex_;
  std::condition_variable keepalive_wake_;
  bool keepalive_quit_ = false;
  std::chrono::steady_clock::time_point last_sent_;
  Status keepalive_failure_;
  std::thread keepalive_;

  // Buffers grown to the largest step and reused.
  std::vector<float> x_;           // [n_tokens][n_embd]
  std::vector<float> head_local_;  // [n_logits][rows] this rank's logits slice (not on the root)
  std::vector<float> head_all_;    // [group] every rank's slice, one after another (root)
  std::vector<size_t> head_bytes_; // [group] bytes of each rank's logits slice
  std::vector<float> full_logits_; // [n_logits][n_vocab] on the last stage's first rank
  std::vector<TokenRange> micro_;  // this step's micro-batches
  model::Batch part_;              // the micro-batch being run (when the step is split)
  std::vector<std::byte> message_;
  std::vector<int32_t> lengths_;
  StepPayload payload_;
  std::unique_ptr<model::KvCache> worker_cache_;

  // Coordinator: block operations not yet sent (guarded by step_mutex_).
  std::vector<BlockOp> block_ops_;
  // Worker: its slice of each prefix block, by the coordinator's id.
  struct HeldBlock {
    int n = 0;                  // positions
    std::vector<uint8_t> rows;  // KvCache::ReadRows' layout
  };
  std::unordered_map<uint64_t, HeldBlock> blocks_;
};

}  // namespace cohort::parallel
