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
#include <set>
#include <thread>
#include <vector>

#include "comm/secure_channel.h"
#include "comm/socket_util.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/control_channel.h"
#include "parallel/file_digest.h"
#include "parallel/job_limits.h"
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

// A job as session.cc's MakeJob writes it, for rank 1 of a tp plan over 2 ranks.
nlohmann::json ValidJob() {
  auto file = gguf::File::Open(kModel);
  EXPECT_TRUE(file.ok());
  auto plan = parallel::PlanOfLayout(**file, "tp", 2);
  EXPECT_TRUE(plan.ok());
  auto sha = parallel::Sha256OfFile(kModel);
  EXPECT_TRUE(sha.ok());
  return {{"version", 3}, {"n_ranks", 2}, {"rank", 1}, {"model", kModel}, {"model_sha256", *sha},
          {"model_bytes", (*file)->file_size()}, {"plan", plan->ToJson()}, {"threads", 1},
          {"transport", "tcp"}, {"shm_name", "job-0123456789abcdef"}, {"group_id", 42},
          {"link_latency_us", 0}, {"link_bandwidth", 0}, {"setup_timeout_ms", 5000},
          {"comm_timeout_ms", 5000}, {"idle_timeout_ms", 5000}, {"transfer_timeout_ms", 5000}};
}

// Sends `job` to the service and returns its first answer (an error object, or the ok reply).
Result<nlohmann::json> Offer(const std::string& address, const nlohmann::json& job,
                             std::unique_ptr<parallel::ControlChannel>* keep = nullptr) {
  COHORT_ASSIGN_OR_RETURN(auto channel, parallel::ControlChannel::Connect(address, std::chrono::seconds(2)));
  // A worker that refuses at the door answers before reading the job: read that answer even
  // when the send failed.
  (void)channel->Send(job, comm::DeadlineAfter(std::chrono::seconds(2)));
  auto reply = channel->ReceiveAny(comm::DeadlineAfter(std::chrono::seconds(10)));
  if (keep != nullptr) *keep = std::move(channel);
  return reply;
}

std::string ErrorOf(const Result<nlohmann::json>& reply) {
  if (!reply.ok()) return "no reply: " + reply.status().ToString();
  return reply->value("error", std::string());
}

struct Service {
  Logger log{LogLevel::kError};
  std::unique_ptr<WorkerService> service;
  explicit Service(WorkerServiceOptions o) {
    o.listen = "127.0.0.1:0";
    auto bound = WorkerService::Bind(o, log);
    EXPECT_TRUE(bound.ok()) << bound.status().ToString();
    service = std::move(*bound);
    service->Start();
  }
};

// A real session through the service still works (the node is alive and serving).
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

void ExpectServesAJob(const std::string& address) {
  Logger log(LogLevel::kError);
  const Status step = RunOneStep(address, std::nullopt, log);
  EXPECT_TRUE(step.ok()) << step.ToString();
}

// Issue 23: a job with 2^31 - 1 threads made the thread pool allocate 2^31 entries and
// aborted the node. Now it, and every other field out of bounds, is refused by name, and the
// service keeps serving.
TEST(WorkerServiceHostile, OutOfBoundsFieldsAreRefusedAndTheServiceLives) {
  WorkerServiceOptions o;
  o.slots = 2;
  Service svc(o);
  const std::string address = svc.service->address();
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"threads", 2147483647},     {"threads", 0},           {"threads", -5},
      {"idle_timeout_ms", 3600000}, {"setup_timeout_ms", 0},  {"comm_timeout_ms", int64_t{1} << 60},
      {"n_ranks", 100000},         {"rank", 7},              {"model_bytes", 0},
      {"transport", "carrier-pigeon"}, {"shm_name", "../../dev/shm/x"}, {"threads", "many"},
      {"link_latency_us", -1},     {"transfer_timeout_ms", uint64_t{1} << 63}};
  for (const auto& [field, value] : cases) {
    nlohmann::json job = ValidJob();
    job[field] = value;
    const std::string error = ErrorOf(Offer(address, job));
    EXPECT_NE(error.find(field), std::string::npos) << field << "=" << value.dump() << ": " << error;
  }
  nlohmann::json missing = ValidJob();
  missing.erase("threads");
  EXPECT_NE(ErrorOf(Offer(address, missing)).find("threads"), std::string::npos);
  EXPECT_NE(ErrorOf(Offer(address, nlohmann::json::array({1, 2}))), "");
  ExpectServesAJob(address);
}

// A job from a host that is not a member is refused before its job is read.
TEST(WorkerServiceHostile, NonMemberCoordinatorIsRefused) {
  WorkerServiceOptions o;
  o.member_hosts = [] { return std::set<std::string>{"10.254.0.1"}; };
  Service svc(o);
  const std::string error = ErrorOf(Offer(svc.service->address(), ValidJob()));
  EXPECT_NE(error.find("not a member"), std::string::npos) << error;
}

// The coordinator's go message may not point the worker at another host (a port scan through
// the worker): rank 0 must be on the coordinator's host, every rank on a member's.
TEST(WorkerServiceHostile, DataAddressesOutsideTheClusterAreRefused) {
  WorkerServiceOptions o;
  o.member_hosts = [] { return std::set<std::string>{"127.0.0.1"}; };
  Service svc(o);
  for (const char* target : {"10.1.2.3:22", "127.0.0.2:22"}) {
    std::unique_ptr<parallel::ControlChannel> channel;
    auto reply = Offer(svc.service->address(), ValidJob(), &channel);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    ASSERT_TRUE(reply->value("ok", false)) << reply->dump();
    const std::string own = reply->value("data_address", std::string());
    ASSERT_TRUE(channel->Send({{"addresses", {target, own}}}, comm::DeadlineAfter(std::chrono::seconds(2))).ok());
    auto answer = channel->ReceiveAny(comm::DeadlineAfter(std::chrono::seconds(10)));
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_NE(answer->value("error", std::string()).find("rank 0"), std::string::npos) << answer->dump();
  }
  ExpectServesAJob(svc.service->address());
}

// One coordinator host holds at most its share of the slots: with 3 slots, two silent
// connections from this host leave the third connection refused at once, not queued.
TEST(WorkerServiceHostile, OneCoordinatorCannotHoldEverySlot) {
  WorkerServiceOptions o;
  o.slots = 3;
  Service svc(o);
  std::vector<std::unique_ptr<parallel::ControlChannel>> held;
  for (int i = 0; i < 2; ++i) {
    auto c = parallel::ControlChannel::Connect(svc.service->address(), std::chrono::seconds(2));
    ASSERT_TRUE(c.ok());
    held.push_back(std::move(*c));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // both taken by a slot
  const auto start = std::chrono::steady_clock::now();
  const std::string error = ErrorOf(Offer(svc.service->address(), ValidJob()));
  EXPECT_NE(error.find("already holds"), std::string::npos) << error;
  EXPECT_LT(SecondsSince(start), 2.0);
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ExpectServesAJob(svc.service->address());
}

// The go message's addresses, checked alone: every rank, not only rank 0.
TEST(JobLimits, AddressesMustBeTheCoordinatorsAndMembers) {
  const auto members = [](const std::string& h) { return h == "10.0.0.1" || h == "10.0.0.2" || h == "10.0.0.3"; };
  const std::vector<std::string> good = {"10.0.0.1:5000", "10.0.0.2:5001", "10.0.0.3:5002"};
  EXPECT_TRUE(parallel::ValidateAddresses(good, 1, 3, "10.0.0.1", "10.0.0.2:5001", members).ok());
  // Rank 2 pointed at a host outside the cluster (the port-scan attack).
  auto outside = good;
  outside[2] = "192.168.1.1:22";
  EXPECT_NE(parallel::ValidateAddresses(outside, 1, 3, "10.0.0.1", "10.0.0.2:5001", members).message().find("rank 2"),
            std::string::npos);
  // Without membership (a standalone worker) only rank 0 and this rank are checked.
  EXPECT_TRUE(parallel::ValidateAddresses(outside, 1, 3, "10.0.0.1", "10.0.0.2:5001", nullptr).ok());
  auto moved = good;
  moved[1] = "10.0.0.2:6000";
  EXPECT_FALSE(parallel::ValidateAddresses(moved, 1, 3, "10.0.0.1", "10.0.0.2:5001", members).ok());
  EXPECT_FALSE(parallel::ValidateAddresses({good[0]}, 1, 3, "10.0.0.1", "10.0.0.2:5001", members).ok());
  EXPECT_FALSE(parallel::ValidateAddresses({"nonsense", good[1], good[2]}, 1, 3, "10.0.0.1", "10.0.0.2:5001",
                                           members).ok());
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
