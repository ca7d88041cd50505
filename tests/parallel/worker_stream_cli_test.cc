// `cohort worker --cache-dir` as separate processes: workers whose job names a path they do
// not have are streamed their shares by a coordinator (Session::Start in this process) and the
// instance computes what one process computes; each worker's cache then holds one sparse share
// file allocating about its share.
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/model_plan.h"
#include "parallel/session.h"
#include "parallel/shard_bytes.h"
#include "process_util.h"
#include "share_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

Result<Trace> TraceOf(model::Model& m) {
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  model::KvCacheOptions o;
  o.n_ctx = 64;
  COHORT_ASSIGN_OR_RETURN(auto cache, m.NewKvCache(o));
  Trace t;
  COHORT_RETURN_IF_ERROR(RunTrace(m, ctx, *cache, 4, &t));
  return t;
}

TEST(WorkerStreamCliTest, WorkerProcessesWithoutTheFile) {
  const std::string path = FixtureModel("tiny-qwen3-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  auto single_model = model::Model::Load(**file);
  ASSERT_TRUE(single_model.ok());
  auto want = TraceOf(**single_model);
  ASSERT_TRUE(want.ok()) << want.status().ToString();

  ScratchDir dir;
  const std::string prefix = "cohort worker: listening on ";
  std::vector<Child> workers;
  SessionOptions o;
  o.model_path = dir.Sub("not-here/tiny-qwen3-f32.gguf");
  auto plan = PlanOfLayout(**file, "tp", 3);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  o.plan = *plan;
  o.digest_cache_dir = dir.Sub("coordinator");
  o.setup_timeout = std::chrono::milliseconds(20000);
  for (int w = 1; w <= 2; ++w) {
    workers.push_back(Child::Start({CohortBinary(), "worker", "--listen", "127.0.0.1:0", "--once",
                                    "--cache-dir", dir.Sub("w" + std::to_string(w))}));
    const std::string line = workers.back().ReadLine(10000);
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    o.workers.push_back(line.substr(prefix.size()));
  }
  {
    auto session = Session::Start(o, **file);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    auto got = TraceOf((*session)->executor());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameTrace(*got, *want, 1e-4f);
    for (int w = 1; w <= 2; ++w) {
      auto ranges = ShardByteRanges(**file, (*session)->plan(), w);
      ASSERT_TRUE(ranges.ok());
      std::string share;
      for (const auto& e : std::filesystem::directory_iterator(dir.Sub("w" + std::to_string(w)))) {
        if (e.path().extension() == ".gguf") share = e.path().string();
      }
      ASSERT_FALSE(share.empty()) << "worker " << w << " stored no share";
      EXPECT_GE(AllocatedBytes(share), TotalBytes(*ranges));
      EXPECT_LE(AllocatedBytes(share), BlocksTouchedBytes(*ranges) + 64 * 1024);
    }
  }
  for (Child& c : workers) EXPECT_EQ(c.Wait(5000), 0);
}

}  // namespace
}  // namespace cohort::parallel::testing
