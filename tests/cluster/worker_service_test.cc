// WorkerService owns its threads: stopping it while a coordinator keeps a job running (and
// alive: no idle timeout can end it) returns within a second, the coordinator's next step
// fails instead of hanging, and an idle service stops at once. With the cluster key, only a
// coordinator holding it runs a job (a stranger that says nothing holds a slot only for the
// handshake's bound), and without a key the service will not listen beyond loopback.
#include "cluster/worker_service.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "comm/secure_channel.h"
#include "comm/socket_util.h"
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

// A session to `address` over tiny-llama tp2 with `key`, and its first step's outcome.
Status RunOneStep(const std::string& address, const std::optional<comm::ChannelKey>& key, Logger& log) {
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(kModel));
  parallel::SessionOptions s;
  s.model_path = kModel;
  s.workers = {address};
  s.key = key;
  s.setup_timeout = std::chrono::seconds(20);
  COHORT_ASSIGN_OR_RETURN(s.plan, parallel::PlanOfLayout(*file, "tp", 2));
  COHORT_ASSIGN_OR_RETURN(auto model, parallel::DistributedModel::Connect(s, *file));
  model::KvCacheOptions kv;
  kv.n_ctx = 16;
  COHORT_ASSIGN_OR_RETURN(auto cache, model->NewKvCache(kv));
  ThreadPool pool(1);
  return Step(*model, *cache, pool, log, 0);
}

TEST(WorkerService, WithAKeyOnlyItsHoldersRunJobs) {
  Logger log(LogLevel::kError);
  WorkerServiceOptions o;
  o.listen = "127.0.0.1:0";
  o.slots = 1;
  o.key = *comm::DeriveChannelKey("cluster secret");
  auto service = WorkerService::Bind(o, log);
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  (*service)->Start();
  const std::string address = (*service)->address();
  EXPECT_FALSE(RunOneStep(address, std::nullopt, log).ok());
  const Status wrong = RunOneStep(address, *comm::DeriveChannelKey("another"), log);
  EXPECT_EQ(wrong.code(), StatusCode::kCorrupt) << wrong.ToString();
  // A stranger connects and says nothing: the one slot is back within the handshake's bound.
  auto addr = comm::SocketAddress::Parse(address);
  ASSERT_TRUE(addr.ok());
  auto silent = comm::ConnectTcp(*addr, comm::DeadlineAfter(std::chrono::seconds(2)));
  ASSERT_TRUE(silent.ok());
  const auto start = std::chrono::steady_clock::now();
  const Status good = RunOneStep(address, o.key, log);
  EXPECT_TRUE(good.ok()) << good.ToString();
  EXPECT_LT(SecondsSince(start), 10.0);
  // Stopping does not wait out a stranger's handshake either.
  auto another = comm::ConnectTcp(*addr, comm::DeadlineAfter(std::chrono::seconds(2)));
  ASSERT_TRUE(another.ok());
  ::usleep(200 * 1000);  // the slot is now in its handshake
  const auto stop = std::chrono::steady_clock::now();
  (*service)->Stop();
  EXPECT_LT(SecondsSince(stop), 1.0);
}

TEST(WorkerService, WithoutAKeyListensOnLoopbackOnlyUnlessInsecure) {
  Logger log(LogLevel::kWarn);
  WorkerServiceOptions o;
  o.listen = "0.0.0.0:0";
  const auto refused = WorkerService::Bind(o, log);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("secret"), std::string::npos);
  o.insecure = true;
  EXPECT_TRUE(WorkerService::Bind(o, log).ok());
  o.insecure = false;
  o.key = *comm::DeriveChannelKey("s");
  EXPECT_TRUE(WorkerService::Bind(o, log).ok());
}

}  // namespace
}  // namespace cohort::cluster
