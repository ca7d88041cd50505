// The "N ranks equal 1 rank" runs themselves: a model's trace in one process, and the same
// trace with every rank of a plan on a thread of this process, joined by a local group.
#pragma once

#include <string>
#include <vector>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/executor.h"
#include "trace_util.h"

namespace cohort::parallel::testing {

inline Trace SingleRankTrace(const gguf::File& file, int n_gen) {
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  auto m = model::Model::Load(file);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  model::KvCacheOptions o;
  o.n_ctx = 64;
  auto cache = (*m)->NewKvCache(o);
  EXPECT_TRUE(cache.ok());
  Trace t;
  const Status s = RunTrace(**m, ctx, **cache, n_gen, &t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return t;
}

inline Result<Trace> RanksAsThreadsTrace(const gguf::File& file, const plan::ShardPlan& plan, comm::TransportKind kind,
                                         int n_gen) {
  const int n_ranks = plan.n_ranks();
  COHORT_ASSIGN_OR_RETURN(auto transports, comm::MakeLocalGroup(kind, n_ranks));
  Trace trace;
  const std::vector<Status> statuses = comm::RunOnRanks(n_ranks, [&](int r) -> Status {
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    comm::Communicator world(std::move(transports[r]));
    COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(file));
    COHORT_ASSIGN_OR_RETURN(auto exec, Executor::Create(std::move(m), plan, world));
    if (r != 0) return exec->Serve(ctx);
    model::KvCacheOptions o;
    o.n_ctx = 64;
    COHORT_ASSIGN_OR_RETURN(auto cache, exec->NewKvCache(o));
    Status s = RunTrace(*exec, ctx, *cache, n_gen, &trace);
    const Status stop = exec->Stop();
    return s.ok() ? stop : s;
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].Annotate("rank " + std::to_string(r));
  }
  return trace;
}

}  // namespace cohort::parallel::testing
