// DistributedModel; see launch.h.
#include "parallel/launch.h"

#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#ifdef COHORT_HAVE_MPI
#include "comm/mpi_transport.h"
#endif
#include "parallel/model_plan.h"

namespace cohort::parallel {

Result<std::unique_ptr<DistributedModel>> DistributedModel::Connect(const SessionOptions& options,
                                                                    const gguf::File& file) {
  std::unique_ptr<DistributedModel> d(new DistributedModel());
  COHORT_ASSIGN_OR_RETURN(d->session_, Session::Start(options, file));
  return d;
}

Result<std::unique_ptr<DistributedModel>> DistributedModel::AdoptMpi(const MpiOptions& options,
                                                                     const gguf::File& file, Status* served) {
  COHORT_CHECK(served != nullptr);
#ifdef COHORT_HAVE_MPI
  std::unique_ptr<DistributedModel> d(new DistributedModel());
  COHORT_ASSIGN_OR_RETURN(d->mpi_, comm::MpiRuntime::Init());
  COHORT_ASSIGN_OR_RETURN(plan::LayoutSpec spec, ParseLayout(options.layout, d->mpi_->world_size(), options.shares));
  COHORT_ASSIGN_OR_RETURN(plan::ShardPlan plan, PlanOfModel(file, spec));
  COHORT_ASSIGN_OR_RETURN(auto transport, comm::ConnectMpiGroup(*d->mpi_));
  if (d->mpi_->world_rank() != 0) {
    *served = ServeRank(std::move(transport), plan, file, options.threads, options.comm_timeout, options.log);
    return std::unique_ptr<DistributedModel>();
  }
  COHORT_ASSIGN_OR_RETURN(d->session_, Session::Adopt(std::move(transport), plan, file, options.comm_timeout));
  return d;
#else
  (void)options;
  (void)file;
  return Unsupported("this build has no MPI (install libopenmpi-dev and rebuild)");
#endif
}

DistributedModel::~DistributedModel() {
  session_.reset();  // stops the workers
  mpi_.reset();      // after the session: MPI finalises last
}

const model::ModelConfig& DistributedModel::config() const { return session_->executor().config(); }

Result<std::unique_ptr<model::KvCache>> DistributedModel::NewKvCache(const model::KvCacheOptions& options) const {
  return session_->executor().NewKvCache(options);
}

Status DistributedModel::Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                                 std::span<float> logits) {
  return session_->executor().Forward(ctx, batch, cache, logits);
}

Status DistributedModel::ForwardHidden(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                                       std::span<float> hidden) {
  return session_->executor().ForwardHidden(ctx, batch, cache, hidden);
}

std::string DistributedModel::MemoryReport() const {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  std::string rss;
  while (f != nullptr && std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "Rss", 3) == 0) rss += line;
  }
  if (f != nullptr) std::fclose(f);
  return rss + fmt::format("rank 0: peak resident {:.1f} MiB ({:.1f} MiB of weight slices copied)\n",
                           PeakResidentBytes() / 1048576.0, session_->executor().copied_bytes() / 1048576.0);
}

}  // namespace cohort::parallel
