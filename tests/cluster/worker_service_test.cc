// WorkerService owns its threads: stopping it while a coordinator keeps a job running (and
// alive: no idle timeout can end it) returns within a second, the coordinator's next step
// fails instead of hanging, and an idle service stops at once.
#include "cluster/worker_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/launch.h"
#include "parallel/model_plan.h"

namespace cohort::cluster {
namespace {

const std::string kModel = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

Status Step(model::Model& m, model::KvCache& cache, ThreadPool& pool, Logger& log, int pos) {
  model::Batch batch;
  batch.Add(1 + pos, pos, 0, true);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  return m.Forward(Context{&pool, &log}, batch, cache, logits);
}

TEST(WorkerService, StopEndsARunningJobAtOnce) {
  Logger log(LogLevel::kWarn);
  WorkerServiceOptions o;
  o.listen = "127.0.0.1:0";
  o.slots = 2;
  auto service = WorkerService::Bind(o, log);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  (*service)->Start();

  auto file = gguf::File::Open(kModel);
  ASSERT_TRUE(file.ok());
  parallel::SessionOptions s;
  s.model_path = kModel;
  s.workers = {(*service)->address()};
  s.worker_idle_timeout = std::chrono::seconds(60);  // the job would outlive the test
  auto plan = parallel::PlanOfLayout(**file, "tp", 2);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  s.plan = *plan;
  auto model = parallel::DistributedModel::Connect(s, **file);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  model::KvCacheOptions kv;
  kv.n_ctx = 16;
  auto cache = (*model)->NewKvCache(kv);
  ASSERT_TRUE(cache.ok());
  ThreadPool pool(1);
  ASSERT_TRUE(Step(**model, **cache, pool, log, 0).ok());

  const auto start = std::chrono::steady_clock::now();
  (*service)->Stop();
  EXPECT_LT(SecondsSince(start), 1.0);
  // The worker left: the coordinator's next step says so instead of waiting on it.
  const auto step = std::chrono::steady_clock::now();
  const Status after = Step(**model, **cache, pool, log, 1);
  EXPECT_FALSE(after.ok());
  EXPECT_LT(SecondsSince(step), 5.0) << after.ToString();
}

TEST(WorkerService, IdleServiceStopsAtOnce) {
  Logger log(LogLevel::kWarn);
  WorkerServiceOptions o;
  o.listen = "127.0.0.1:0";
  o.slots = 4;
  auto service = WorkerService::Bind(o, log);
  ASSERT_TRUE(service.ok());
  (*service)->Start();
  const auto start = std::chrono::steady_clock::now();
  (*service)->Stop();
  EXPECT_LT(SecondsSince(start), 1.0);
}

TEST(WorkerService, RefusesBadOptions) {
  Logger log(LogLevel::kWarn);
  WorkerServiceOptions o;
  o.listen = "127.0.0.1:0";
  o.slots = 0;
  EXPECT_EQ(WorkerService::Bind(o, log).status().code(), StatusCode::kInvalidArgument);
  o.slots = 1;
  o.listen = "not an address";
  EXPECT_FALSE(WorkerService::Bind(o, log).ok());
}

}  // namespace
}  // namespace cohort::cluster
