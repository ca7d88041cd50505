// DistributedModel: a model spread over ranks, seen from the coordinator (rank 0) as one
// model::Model, so the engine, the scheduler and the server run it unchanged. The ranks are
// either worker services it connects to (a parallel::Session: `cohort run --workers`, the
// ranks a cluster placement chose, or workers the CLI spawned on this host) or processes that
// mpirun started. It owns what keeps the ranks running; destroying it stops them.
#pragma once

#include <chrono>
#include <memory>
#include <span>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "model/model.h"
#include "model/kv_block_replicas.h"
#include "parallel/session.h"

namespace cohort::comm {
class MpiRuntime;
}

namespace cohort::parallel {

// Also the model's KvBlockReplicas (the executor's): a prefix cache over the coordinator's
// slice has every rank keep its own slice of each block.
class DistributedModel final : public model::Model, public model::KvBlockReplicas {
 public:
  // Rank 0 of `options.plan` here, ranks 1.. on the worker services `options.workers`.
  // `file` is this process's copy of the model and must outlive the result.
  static Result<std::unique_ptr<DistributedModel>> Connect(const SessionOptions& options, const gguf::File& file);

  // Ranks from mpirun: every rank builds the plan of `layout` (ParseLayout's syntax) with
  // `shares` over the world. Rank 0 gets the model; any other rank serves its share until
  // rank 0 stops it and then gets nullptr with the outcome in `*served` (the caller's
  // process then ends: its command is rank 0's).
  struct MpiOptions {
    std::string layout = "tp";
    std::vector<double> shares;
    int threads = 1;  // a serving rank's compute threads
    std::chrono::milliseconds comm_timeout{30000};
    Logger* log = nullptr;  // a serving rank's log (may be null)
  };
  static Result<std::unique_ptr<DistributedModel>> AdoptMpi(const MpiOptions& options, const gguf::File& file,
                                                            Status* served);

  ~DistributedModel() override;

  const model::ModelConfig& config() const override;
  Result<std::unique_ptr<model::KvCache>> NewKvCache(const model::KvCacheOptions& options) const override;
  Status Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits) override;
  Status ForwardHidden(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                       std::span<float> hidden) override;
  void Keep(uint64_t id, int seq, int pos, int n) override { session_->executor().Keep(id, seq, pos, n); }
  void Load(uint64_t id, int seq, int pos) override { session_->executor().Load(id, seq, pos); }
  void Drop(uint64_t id) override { session_->executor().Drop(id); }

  const plan::ShardPlan& plan() const { return session_->plan(); }
  // The plan, for --verbose.
  std::string Describe() const { return session_->plan().ToString(); }
  // This process's resident memory and rank 0's copied weight slices, for --verbose.
  std::string MemoryReport() const;

 private:
  DistributedModel() = default;

  std::unique_ptr<comm::MpiRuntime> mpi_;  // under mpirun; finalised after the session
  std::unique_ptr<Session> session_;
};

}  // namespace cohort::parallel
