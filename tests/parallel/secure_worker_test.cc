// Attacks on a real `cohort worker --secret-file` process from outside the cluster: a
// coordinator without the secret, one with another secret, garbage, a job sent in clear (with
// threads = 2^31-1), and a replay of a genuine coordinator's recorded bytes. None of them runs
// a job or writes a share, the worker stays up and logs each refusal, and a coordinator with
// the secret then gets the single-process logits. Also: a worker will not listen beyond
// loopback without a secret, and says so loudly with --insecure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "process_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

const char* kTokens = "1,10,20,30,40,50,60,70";
const std::string kPrefix = "cohort worker: listening on ";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<float> ReadFloats(const std::string& path) {
  const std::string t = ReadText(path);
  std::vector<float> v(t.size() / sizeof(float));
  std::memcpy(v.data(), t.data(), v.size() * sizeof(float));
  return v;
}

int Port(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

int ConnectLoopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends `bytes`, then waits up to 8 s for the worker to hang up; true when it did (read 0 or a
// reset) having sent back no more than a handshake's 72 bytes.
bool WorkerHangsUpOn(int port, const std::string& bytes) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  size_t answered = 0;
  bool closed = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(8);
  while (!closed && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) closed = true;
    if (n > 0) answered += static_cast<size_t>(n);
  }
  ::close(fd);
  return closed && answered <= 72;
}

// A relay between a coordinator and the worker that records what the coordinator sent on its
// first connection (the control channel: handshake and sealed job).
class RecordingRelay {
 public:
  explicit RecordingRelay(int worker_port) : worker_port_(worker_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    ::listen(listen_fd_, 4);
    socklen_t len = sizeof(a);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~RecordingRelay() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }
  std::string recorded() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return recorded_;
  }

 private:
  void Run() {
    pollfd lp{listen_fd_, POLLIN, 0};
    while (!stop_ && ::poll(&lp, 1, 50) <= 0) {
    }
    if (stop_) return;
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    const int server = ConnectLoopback(worker_port_);
    pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    char buf[65536];
    while (!stop_) {
      if (::poll(p, 2, 50) <= 0) continue;
      if (p[0].revents != 0) {
        const ssize_t n = ::recv(client, buf, sizeof(buf), 0);
        if (n <= 0) break;
        recorded_.append(buf, static_cast<size_t>(n));
        (void)::send(server, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
      if (p[1].revents != 0) {
        const ssize_t n = ::recv(server, buf, sizeof(buf), 0);
        if (n <= 0) break;
        (void)::send(client, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
    ::close(client);
    ::close(server);
  }

  int worker_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::string recorded_;
  std::thread thread_;
};

struct Outcome {
  int rc;
  std::string err;
};

Outcome Logits(const std::vector<std::string>& extra, const std::string& tag) {
  const std::string out = ::testing::TempDir() + "secure_worker_" + tag + ".f32";
  const std::string err = ::testing::TempDir() + "secure_worker_" + tag + ".err";
  std::vector<std::string> args = {CohortBinary(), "-t", "1", "logits", "-m", FixtureModel("tiny-llama-f32"),
                                   "--tokens", kTokens, "-o", out};
  args.insert(args.end(), extra.begin(), extra.end());
  Child c = Child::Start(args, err);
  const int rc = c.Wait(60000);
  return {rc, ReadText(err)};
}

bool Alive(Child& c) { return c.Wait(0) == -1; }

TEST(SecureWorkerTest, OutsidersCannotRunJobsAndTheWorkerStaysUp) {
  const std::string dir = ::testing::TempDir() + "secure_worker_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir + "/cache");
  const std::string secret_file = dir + "/secret";
  std::ofstream(secret_file) << "a long random cluster secret 5b1f0c9e\n";
  std::ofstream(dir + "/wrong") << "another secret\n";
  const std::string log = dir + "/worker.err";
  Child worker = Child::Start({CohortBinary(), "-v", "worker", "--listen", "127.0.0.1:0", "--secret-file", secret_file,
                               "--cache-dir", dir + "/cache"},
                              log);
  const std::string line = worker.ReadLine(10000);
  ASSERT_EQ(line.rfind(kPrefix, 0), 0u) << line;
  const std::string address = line.substr(kPrefix.size());
  const int port = Port(address);

  // A coordinator without the secret, and one with another.
  const Outcome none = Logits({"--workers", address}, "none");
  EXPECT_NE(none.rc, 0);
  EXPECT_NE(none.err.find("--secret"), std::string::npos) << none.err;
  const Outcome wrong = Logits({"--workers", address, "--secret-file", dir + "/wrong"}, "wrong");
  EXPECT_NE(wrong.rc, 0);
  EXPECT_NE(wrong.err.find("authentication failed"), std::string::npos) << wrong.err;
  ASSERT_TRUE(Alive(worker));

  // Garbage, and a job in clear asking for 2^31-1 threads: hung up on, the worker still up.
  std::string garbage(3000, '\0');
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 131 + 7) & 0xff);
  EXPECT_TRUE(WorkerHangsUpOn(port, garbage));
  const std::string job = R"({"version":3,"rank":1,"n_ranks":2,"threads":2147483647,"model":"/etc/shadow"})";
  std::string framed(4, '\0');
  for (int i = 0; i < 4; ++i) framed[i] = static_cast<char>(job.size() >> (8 * i));
  EXPECT_TRUE(WorkerHangsUpOn(port, framed + job));
  ASSERT_TRUE(Alive(worker));

  // A genuine coordinator through a recording relay; then its bytes replayed.
  ASSERT_EQ(Logits({}, "single").rc, 0);
  const std::vector<float> want = ReadFloats(::testing::TempDir() + "secure_worker_single.f32");
  std::string recorded;
  {
    RecordingRelay relay(port);
    const Outcome good = Logits({"--workers", "127.0.0.1:" + std::to_string(relay.port()), "--secret-file", secret_file},
                            "good");
    ASSERT_EQ(good.rc, 0) << good.err;
    recorded = relay.recorded();
    const std::vector<float> got = ReadFloats(::testing::TempDir() + "secure_worker_good.f32");
    ASSERT_EQ(got.size(), want.size());
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
  }
  ASSERT_GT(recorded.size(), size_t{72});
  // The model path travelled sealed: it is not in the recording.
  EXPECT_EQ(recorded.find("tiny-llama"), std::string::npos);
  EXPECT_TRUE(WorkerHangsUpOn(port, recorded));
  ASSERT_TRUE(Alive(worker));

  // Still serving: one more genuine job.
  EXPECT_EQ(Logits({"--workers", address, "--secret-file", secret_file}, "after").rc, 0);
  ASSERT_TRUE(Alive(worker));
  worker.Kill();
  const std::string text = ReadText(log);
  size_t refusals = 0;
  for (size_t at = text.find("refused a connection"); at != std::string::npos;
       at = text.find("refused a connection", at + 1)) {
    ++refusals;
  }
  EXPECT_GE(refusals, size_t{5}) << text;  // none, wrong, garbage, clear job, replay
  EXPECT_EQ(text.find("2147483647"), std::string::npos);  // the clear job was never parsed
  size_t shares = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/cache")) shares += e.path().extension() == ".gguf";
  EXPECT_EQ(shares, 0u);
  std::filesystem::remove_all(dir);
}

// --allow-coordinator: a worker that admits another host refuses this one's coordinator, even
// with the secret, before the handshake (and logs why); one that admits this host serves it
// the single-process logits.
TEST(SecureWorkerTest, AllowCoordinatorAdmitsOnlyTheHostsGiven) {
  const std::string dir = ::testing::TempDir() + "secure_worker_allow_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string secret_file = dir + "/secret";
  std::ofstream(secret_file) << "the allow-coordinator test's secret\n";
  auto start = [&](const std::string& allowed, const std::string& log, std::string* address) {
    Child worker = Child::Start({CohortBinary(), "-v", "worker", "--listen", "127.0.0.1:0", "--secret-file", secret_file,
                                 "--cache-dir", dir + "/cache", "--allow-coordinator", allowed},
                                log);
    const std::string line = worker.ReadLine(10000);
    EXPECT_EQ(line.rfind(kPrefix, 0), 0u) << line;
    *address = line.substr(kPrefix.size());
    return worker;
  };
  ASSERT_EQ(Logits({}, "allow_single").rc, 0);
  const std::vector<float> want = ReadFloats(::testing::TempDir() + "secure_worker_allow_single.f32");

  std::string address;
  Child other = start("10.9.9.9", dir + "/other.err", &address);
  const Outcome refused = Logits({"--workers", address, "--secret-file", secret_file}, "allow_refused");
  EXPECT_NE(refused.rc, 0);
  EXPECT_NE(refused.err.find("--allow-coordinator"), std::string::npos) << refused.err;
  EXPECT_TRUE(Alive(other));
  other.Kill();
  EXPECT_NE(ReadText(dir + "/other.err").find("refused a connection"), std::string::npos) << ReadText(dir + "/other.err");

  Child allowed = start("10.9.9.9,127.0.0.1", dir + "/allowed.err", &address);
  const Outcome served = Logits({"--workers", address, "--secret-file", secret_file}, "allow_served");
  ASSERT_EQ(served.rc, 0) << served.err;
  const std::vector<float> got = ReadFloats(::testing::TempDir() + "secure_worker_allow_served.f32");
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(got.empty());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
  allowed.Kill();
  std::filesystem::remove_all(dir);
}

TEST(SecureWorkerTest, NoSecretBeyondLoopbackNeedsInsecureWhichIsLoud) {
  const std::string err = ::testing::TempDir() + "secure_worker_any.err";
  Child refused = Child::Start({CohortBinary(), "worker", "--listen", "0.0.0.0:0", "--once"}, err);
  EXPECT_EQ(refused.Wait(10000), 1);
  EXPECT_NE(ReadText(err).find("needs --secret"), std::string::npos) << ReadText(err);
  Child insecure = Child::Start({CohortBinary(), "worker", "--listen", "0.0.0.0:0", "--once", "--insecure"}, err);
  EXPECT_EQ(insecure.ReadLine(10000).rfind(kPrefix, 0), 0u);
  EXPECT_NE(ReadText(err).find("WARNING: --insecure"), std::string::npos) << ReadText(err);
}

}  // namespace
}  // namespace cohort::parallel::testing
