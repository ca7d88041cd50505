// What happens when peers misbehave: a rank that never arrives (timeout), a peer that closes or
// whose process is SIGKILLed mid-collective (kUnavailable, quickly), and garbage on the wire
// (rejected with a clear error, no crash, no giant allocation).
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <gtest/gtest.h>

#include "comm/all_reduce.h"
#include "comm/barrier.h"
#include "comm/frame.h"
#include "comm/local_group.h"
#include "comm/shm_transport.h"
#include "comm/socket_util.h"
#include "comm/tcp_transport.h"
#ifdef COHORT_HAVE_UCX
#include "comm/ucx_transport.h"
#endif

namespace cohort::comm {
namespace {

using std::chrono::milliseconds;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class FailureTest : public ::testing::TestWithParam<TransportKind> {};

TEST_P(FailureTest, RankThatNeverArrivesGivesTimeoutWithinTheBound) {
  auto group = MakeLocalGroup(GetParam(), 3);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  std::vector<std::unique_ptr<Communicator>> comms;
  for (auto& t : *group) comms.push_back(std::make_unique<Communicator>(std::move(t)));
  const auto start = Clock::now();
  // Rank 2 never calls the collective.
  std::vector<Status> statuses = RunOnRanks(2, [&](int r) {
    std::vector<float> data(1000, 1.0f);
    return AllReduceSum(*comms[r], data, {.timeout = milliseconds(300)});
  });
  const double elapsed = SecondsSince(start);
  for (const Status& s : statuses) EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_GE(elapsed, 0.29);
  EXPECT_LT(elapsed, 3.0);  // generous: CI runs tests in parallel on 2 cores
  // A broken transport stays broken rather than reading half a message later.
  std::vector<float> again(4, 1.0f);
  EXPECT_EQ(AllReduceSum(*comms[0], again).code(), StatusCode::kTimeout);
}

TEST_P(FailureTest, PeerThatClosesGivesUnavailableQuickly) {
  auto group = MakeLocalGroup(GetParam(), 2);
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  Communicator comm(std::move((*group)[0]));
  std::unique_ptr<Transport> peer = std::move((*group)[1]);
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    peer->Close();
  });
  const auto start = Clock::now();
  std::vector<float> data(4096, 1.0f);
  Status status = AllReduceSum(comm, data, {.timeout = milliseconds(10000)});
  closer.join();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_LT(SecondsSince(start), 3.0);
}

// The peer is a forked child process that joins the group, completes one all-reduce, and then
// hangs, so rank 0 sits inside the next all-reduce when the child is SIGKILLed.
TEST_P(FailureTest, PeerProcessKilledMidCollectiveGivesUnavailableQuickly) {
  const TransportKind kind = GetParam();
  std::vector<std::unique_ptr<TcpListener>> listeners(2);
  TcpOptions tcp;
  ShmOptions shm;
  if (kind != TransportKind::kShm) {
    for (auto& l : listeners) {
      auto bound = TcpListener::Bind("127.0.0.1:0");
      ASSERT_TRUE(bound.ok());
      l = std::move(bound).value();
      tcp.addresses.push_back(l->address());
    }
    tcp.group_id = 42;
  } else {
    shm.n_ranks = 2;
    shm.name = "killtest-" + std::to_string(getpid());
  }
  auto connect = [&](int rank) -> Result<std::unique_ptr<Transport>> {
    if (kind == TransportKind::kTcp) {
      TcpOptions options = tcp;
      options.rank = rank;
      return ConnectTcpGroup(options, std::move(listeners[rank]));
    }
#ifdef COHORT_HAVE_UCX
    if (kind == TransportKind::kUcx) {
      UcxOptions options;
      options.bootstrap = tcp;
      options.bootstrap.rank = rank;
      return ConnectUcxGroup(options, std::move(listeners[rank]));
    }
#endif
    ShmOptions options = shm;
    options.rank = rank;
    return ConnectShmGroup(options);
  };
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto transport = connect(1);
    if (!transport.ok()) _exit(2);
    Communicator comm(std::move(transport).value());
    std::vector<float> data(4096, 2.0f);
    if (!AllReduceSum(comm, data).ok()) _exit(3);
    for (;;) pause();  // never joins the next all-reduce; killed from the parent
  }
  auto transport = connect(0);
  ASSERT_TRUE(transport.ok()) << transport.status().ToString();
  Communicator comm(std::move(transport).value());
  std::vector<float> data(4096, 1.0f);
  ASSERT_TRUE(AllReduceSum(comm, data).ok());
  EXPECT_EQ(data[0], 3.0f);
  std::thread killer([child] {
    std::this_thread::sleep_for(milliseconds(200));
    kill(child, SIGKILL);
  });
  const auto start = Clock::now();
  Status status = AllReduceSum(comm, data, {.timeout = milliseconds(20000)});
  const double elapsed = SecondsSince(start);
  killer.join();
  int wstatus = 0;
  waitpid(child, &wstatus, 0);
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_LT(elapsed, 3.0);  // issue 4 asks for a clear error within 5 s
  EXPECT_TRUE(WIFSIGNALED(wstatus));
}

INSTANTIATE_TEST_SUITE_P(Comm, FailureTest,
                         ::testing::ValuesIn(AvailableTransportKinds()),
                         [](const auto& info) { return std::string(TransportKindName(info.param)); });

// Busy-polling never sleeps, so the shared-memory transport must look at liveness while
// spinning too.
TEST(ShmBusyPollTest, BusyPollingStillNoticesAClosedPeer) {
  ShmOptions options;
  options.n_ranks = 2;
  options.name = "busypoll-" + std::to_string(getpid());
  options.wait.busy_poll = true;
  std::vector<Result<std::unique_ptr<Transport>>> group;
  group.emplace_back(Internal("not run"));
  group.emplace_back(Internal("not run"));
  RunOnRanks(2, [&](int r) {
    ShmOptions mine = options;
    mine.rank = r;
    group[r] = ConnectShmGroup(mine);
    return Status::Ok();
  });
  ASSERT_TRUE(group[0].ok() && group[1].ok());
  std::thread closer([&] {
    std::this_thread::sleep_for(milliseconds(100));
    group[1].value()->Close();
  });
  std::vector<std::byte> buffer(64);
  const auto start = Clock::now();
  Status status = group[0].value()->Recv(1, 3, buffer, DeadlineAfter(milliseconds(10000)));
  closer.join();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable) << status.ToString();
  EXPECT_LT(SecondsSince(start), 3.0);
}

// A client that connects to a rank's port and sends garbage is dropped; the real peer still
// joins and the group works.
TEST(TcpRendezvousTest, GarbageConnectionIsRejectedAndGroupStillForms) {
  auto l0 = TcpListener::Bind("127.0.0.1:0");
  auto l1 = TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(l0.ok() && l1.ok());
  TcpOptions options;
  options.addresses = {(*l0)->address(), (*l1)->address()};
  options.group_id = 7;
  options.connect_timeout = milliseconds(5000);
  Result<std::unique_ptr<Transport>> rank0 = Internal("not run");
  std::thread t0([&rank0, &l0, options] { rank0 = ConnectTcpGroup(options, std::move(l0).value()); });
  {
    // Garbage: a frame-like header claiming 2^60 bytes, then random bytes.
    auto addr = ParseAddress(options.addresses[0]);
    ASSERT_TRUE(addr.ok());
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)), 0);
    std::vector<std::byte> junk(64, std::byte{0xff});
    StoreLe64(junk.data() + 16, uint64_t{1} << 60);
    ASSERT_EQ(write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
    char byte;
    EXPECT_LE(read(fd, &byte, 1), 0);  // the rank hangs up on us without answering
    close(fd);
  }
  options.rank = 1;
  auto rank1 = ConnectTcpGroup(options, std::move(l1).value());
  t0.join();
  ASSERT_TRUE(rank0.ok()) << rank0.status().ToString();
  ASSERT_TRUE(rank1.ok()) << rank1.status().ToString();
  std::vector<std::unique_ptr<Communicator>> comms;
  comms.push_back(std::make_unique<Communicator>(std::move(rank0).value()));
  comms.push_back(std::make_unique<Communicator>(std::move(rank1).value()));
  std::vector<std::vector<float>> data = {{1.0f, 2.0f}, {10.0f, 20.0f}};
  for (const Status& s : RunOnRanks(2, [&](int r) { return AllReduceSum(*comms[r], data[r]); })) {
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  EXPECT_EQ(data[1][1], 22.0f);
}

TEST(TcpRendezvousTest, SilentPeerGivesTimeout) {
  auto l0 = TcpListener::Bind("127.0.0.1:0");
  ASSERT_TRUE(l0.ok());
  TcpOptions options;
  options.addresses = {(*l0)->address(), "127.0.0.1:1"};
  options.connect_timeout = milliseconds(300);
  const auto start = Clock::now();
  auto rank0 = ConnectTcpGroup(options, std::move(l0).value());
  EXPECT_EQ(rank0.status().code(), StatusCode::kTimeout) << rank0.status().ToString();
  EXPECT_LT(SecondsSince(start), 3.0);
}

// Garbage inside an established stream: a transport over one end of a socket pair, the test
// writing raw bytes into the other.
class StreamGarbageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0);
    ASSERT_TRUE(SetNonBlocking(fds_[0]).ok());
    transport_ = MakeTcpTransport(0, {-1, fds_[0]}, TcpOptions{});
  }
  void TearDown() override { close(fds_[1]); }
  Status Receive(size_t bytes, uint32_t tag = 5) {
    std::vector<std::byte> buffer(bytes);
    return transport_->Recv(1, tag, buffer, DeadlineAfter(milliseconds(2000)));
  }
  void Write(std::span<const std::byte> bytes) {
    ASSERT_EQ(write(fds_[1], bytes.data(), bytes.size()), ssize_t(bytes.size()));
  }
  int fds_[2] = {-1, -1};
  std::unique_ptr<Transport> transport_;
};

TEST_F(StreamGarbageTest, RandomBytesAreRejected) {
  std::vector<std::byte> junk(100);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = std::byte(i * 37 + 11);
  Write(junk);
  Status status = Receive(16);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_NE(status.message().find("magic"), std::string::npos) << status.ToString();
}

TEST_F(StreamGarbageTest, HugeLengthIsRejectedWithoutAllocating) {
  Write(EncodeFrameHeader({5, uint64_t{1} << 40}));
  Status status = Receive(16);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt) << status.ToString();
}

TEST_F(StreamGarbageTest, WrongLengthOrTagIsRejected) {
  Write(EncodeFrameHeader({5, 8}));
  EXPECT_EQ(Receive(16).code(), StatusCode::kCorrupt);
  StreamGarbageTest::TearDown();
  SetUp();
  Write(EncodeFrameHeader({6, 16}));
  Status status = Receive(16, 5);
  EXPECT_EQ(status.code(), StatusCode::kCorrupt);
  EXPECT_NE(status.message().find("tag"), std::string::npos) << status.ToString();
}

TEST_F(StreamGarbageTest, PeerClosingMidFrameIsUnavailable) {
  Write(EncodeFrameHeader({5, 16}));
  const std::byte half[8] = {};
  Write(half);
  close(fds_[1]);
  fds_[1] = open("/dev/null", O_RDONLY);  // TearDown closes something harmless
  EXPECT_EQ(Receive(16).code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::comm
