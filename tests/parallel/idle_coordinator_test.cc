// A worker and a silent coordinator: a coordinator that is alive but idle keeps its workers
// (it sends keep-alives), and one that goes silent without closing its connections (here its
// process stopped with SIGSTOP: its sockets stay open, nothing arrives) is left by its worker
// within the job's idle timeout, with a clear error, instead of the worker holding its share.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "comm/tcp_transport.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/model_plan.h"
#include "parallel/session.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

using Clock = std::chrono::steady_clock;

// A worker the coordinator never reached still waits in accept: a connection that closes at
// once wakes it (harmless when it has already returned).
void WakeWorker(const std::string& address) {
  (void)ControlChannel::Connect(address, std::chrono::milliseconds(500));
}

struct WakeOnExit {
  std::string address;
  ~WakeOnExit() { WakeWorker(address); }
};

SessionOptions Options(const std::string& worker, std::chrono::milliseconds idle) {
  SessionOptions o;
  o.model_path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(o.model_path);
  EXPECT_TRUE(file.ok());
  if (file.ok()) {
    auto plan = PlanOfLayout(**file, "tp", 2);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (plan.ok()) o.plan = *plan;
  }
  o.workers = {worker};
  o.setup_timeout = std::chrono::milliseconds(20000);
  o.worker_idle_timeout = idle;
  return o;
}

// Idle for three idle timeouts between two traces: the worker stays, the second trace (on a
// fresh cache) equals the first, and the worker leaves cleanly when the session ends.
TEST(IdleCoordinatorTest, AliveIdleCoordinatorKeepsItsWorker) {
  auto listener = comm::TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto file = gguf::File::Open(FixtureModel("tiny-llama-f32"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // The future outlives the session (an early ASSERT return closes the session first, which
  // ends the worker, and then waits for it).
  auto served = std::async(std::launch::async, [&] { return ServeOneJob((*listener)->fd(), nullptr); });
  {
    const WakeOnExit wake{(*listener)->address()};
    const auto idle = std::chrono::milliseconds(1000);  // keep-alives every 250 ms
    auto session = Session::Start(Options((*listener)->address(), idle), **file);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    model::KvCacheOptions o;
    o.n_ctx = 64;
    Trace first, second;
    auto cache = (*session)->executor().NewKvCache(o);
    ASSERT_TRUE(cache.ok());
    Status st = RunTrace((*session)->executor(), ctx, **cache, 2, &first);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::this_thread::sleep_for(3 * idle);
    cache = (*session)->executor().NewKvCache(o);
    ASSERT_TRUE(cache.ok());
    st = RunTrace((*session)->executor(), ctx, **cache, 2, &second);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ExpectSameTrace(second, first, 0.0f);
  }
  const Status worker_status = served.get();
  EXPECT_TRUE(worker_status.ok()) << worker_status.ToString();
}

// The coordinator runs in a child process (forked before this test starts any thread), runs
// one trace, says so on a pipe and idles; once it is stopped, the worker must give up within
// its idle timeout (1 s) plus slack, not after the 30 s collective bound or never.
TEST(IdleCoordinatorTest, StoppedCoordinatorIsLeftWithinTheIdleTimeout) {
  auto listener = comm::TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string address = (*listener)->address();
  const auto idle = std::chrono::milliseconds(1000);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the coordinator: no gtest here, only an exit code
    ::close(ready[0]);
    auto file = gguf::File::Open(FixtureModel("tiny-llama-f32"));
    if (!file.ok()) ::_exit(2);
    auto session = Session::Start(Options(address, idle), **file);
    if (!session.ok()) ::_exit(3);
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    model::KvCacheOptions o;
    o.n_ctx = 64;
    auto cache = (*session)->executor().NewKvCache(o);
    Trace t;
    if (!cache.ok() || !RunTrace((*session)->executor(), ctx, **cache, 2, &t).ok()) ::_exit(4);
    if (::write(ready[1], "R", 1) != 1) ::_exit(5);
    for (;;) ::pause();  // alive and idle until stopped (then killed)
  }
  ::close(ready[1]);
  auto served = std::async(std::launch::async, [&] { return ServeOneJob((*listener)->fd(), nullptr); });
  pollfd p{ready[0], POLLIN, 0};
  char byte = 0;
  const bool coordinator_ready = ::poll(&p, 1, 20000) == 1 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  Clock::time_point stopped{};
  if (coordinator_ready) {
    // Alive and idle for three idle timeouts first: the worker must still be serving.
    EXPECT_EQ(served.wait_for(3 * idle), std::future_status::timeout) << "left an alive coordinator";
    ::kill(child, SIGSTOP);
    stopped = Clock::now();
  }
  const bool left = served.wait_for(std::chrono::seconds(coordinator_ready ? 5 : 25)) ==
                    std::future_status::ready;
  const double seconds = std::chrono::duration<double>(Clock::now() - stopped).count();
  ::kill(child, SIGKILL);  // also wakes a worker still waiting (its peer's sockets close)
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  WakeWorker(address);
  const Status st = served.get();
  ASSERT_TRUE(coordinator_ready) << "coordinator child failed, status " << wstatus << ": "
                                 << st.ToString();
  EXPECT_TRUE(left) << "the worker still waits 5 s after its coordinator went silent";
  EXPECT_LT(seconds, 3.0);
  EXPECT_GT(seconds, 0.5);
  EXPECT_EQ(st.code(), StatusCode::kTimeout) << st.ToString();
  EXPECT_NE(st.message().find("no word from the coordinator"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace cohort::parallel::testing
