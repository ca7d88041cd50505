// Several ClusterNodes in one process on loopback addresses (127.0.0.x), found through
// --peers: membership converges, every node names the same leader and holds the same agreed
// state; a stopped node is marked suspect, then dead, and a stopped leader replaced; a
// restarted node keeps its id and rejoins; a wrong secret and garbage at the ports change
// nothing but counters. The liveness tests move a ManualClock instead of sleeping through the
// timeouts; heartbeats still travel over real loopback sockets.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cluster/cluster_node.h"
#include "comm/socket_util.h"
#include "core/clock.h"

namespace cohort::cluster {
namespace {

using comm::Fd;
using comm::SocketAddress;

constexpr char kSecret[] = "correct horse battery staple";

bool WaitUntil(const std::function<bool()>& done, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class ClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One port for every node, each on its own loopback address; the pid spreads concurrent
    // test processes over ports.
    port_ = 20000 + static_cast<int>(::getpid() % 20000);
    dir_ = ::testing::TempDir() + "/cohort_cluster_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  std::string Address(int i) const { return "127.0.0." + std::to_string(10 + i) + ":" + std::to_string(port_); }

  ClusterOptions Options(int i, int n, const std::string& secret = kSecret) const {
    ClusterOptions o;
    o.listen = Address(i);
    for (int k = 0; k < n; ++k) {
      if (k != i) o.peers.push_back(Address(k));
    }
    o.secret = secret;
    o.state_dir = dir_ + "/node" + std::to_string(i);
    o.name = "node" + std::to_string(i);
    o.multicast = false;
    o.heartbeat_ms = 50;
    // Generous against a loaded test machine; still well inside the time budget. In the tests
    // on the ManualClock these are manual milliseconds, which pass only when a test says so.
    o.timeouts = {kSuspectMs, kDeadMs, 60000};
    o.clock = clock_;
    o.ping_interval_ms = 200;
    o.probe_interval_ms = 500;
    o.probe_bytes = 256 << 10;
    // Tiny benchmarks: real measurements in a few milliseconds.
    o.profile.bandwidth_buffer_bytes = 1 << 20;
    o.profile.bandwidth_passes = 1;
    o.profile.matmul_dim = 64;
    o.profile.matmul_tokens = 2;
    o.profile.threads = 1;
    return o;
  }

  void StartNodes(int n) {
    nodes_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) StartNode(i, n);
  }
  void StartNode(int i, int n) {
    auto node = ClusterNode::Start(Options(i, n), &log_, Recorder(i));
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    nodes_[static_cast<size_t>(i)] = std::move(*node);
  }

  // Nodes started after this read the manual clock: their silence timeouts run only as far as
  // AdvanceAndSettle moves it.
  void UseManualClock() { clock_ = &manual_; }

  // Callbacks that keep every member event node `observer` reports.
  ClusterCallbacks Recorder(int observer) {
    ClusterCallbacks callbacks;
    callbacks.on_member = [this, observer](const MemberChange& c) {
      std::lock_guard<std::mutex> lock(events_mutex_);
      events_.push_back({observer, c});
    };
    return callbacks;
  }
  // How many events of kind `event` about `id` were reported, by any node.
  size_t CountEvents(const NodeId& id, MemberEvent event) {
    std::lock_guard<std::mutex> lock(events_mutex_);
    size_t n = 0;
    for (const auto& [observer, c] : events_) n += c.id == id && c.event == event ? 1 : 0;
    return n;
  }
  // Suspect or dead events about any of the running nodes: heartbeats should have kept each
  // of them alive.
  size_t CountLivenessLossesOfRunning() {
    std::set<NodeId> running;
    for (const auto& n : nodes_) {
      if (n) running.insert(n->id());
    }
    std::lock_guard<std::mutex> lock(events_mutex_);
    size_t n = 0;
    for (const auto& [observer, c] : events_) {
      const bool lost = c.event == MemberEvent::kSuspect || c.event == MemberEvent::kDead;
      n += lost && running.count(c.id) ? 1 : 0;
    }
    return n;
  }

  // Moves the manual clock on by `step`, then waits (in real time) until every running node
  // has heard every other running node since: each of them has then ticked on the new time,
  // so the silence timeouts have been applied. A running peer is never silent for more than
  // one step, so steps below the suspect timeout keep the running nodes alive.
  bool AdvanceAndSettle(std::chrono::milliseconds step) {
    manual_.Advance(step);
    std::set<NodeId> running;
    for (const auto& n : nodes_) {
      if (n) running.insert(n->id());
    }
    return WaitUntil([&] {
      for (const auto& n : nodes_) {
        if (!n) continue;
        size_t heard = 0;
        for (const MemberView& m : n->Snapshot().members) {
          if (m.is_self || !running.count(m.id)) continue;
          if (m.silent_ms >= static_cast<uint64_t>(step.count())) return false;
          ++heard;
        }
        if (heard + 1 != running.size()) return false;
      }
      return true;
    }, 10000);
  }

  // The liveness `observer` sees for `id` (kAlive when it does not know it).
  Liveness LivenessOf(int observer, const NodeId& id) const {
    for (const MemberView& m : nodes_[static_cast<size_t>(observer)]->Snapshot().members) {
      if (m.id == id) return m.liveness;
    }
    return Liveness::kAlive;
  }
  // True when every running node sees `id` as `liveness`.
  bool AllSee(const NodeId& id, Liveness liveness) const {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i] && LivenessOf(static_cast<int>(i), id) != liveness) return false;
    }
    return true;
  }

  // True when every running node sees exactly the running nodes alive, names the lowest of
  // them leader and holds an agreed state listing them, at the same (term, version).
  bool Converged() const {
    std::vector<NodeId> running;
    for (const auto& n : nodes_) {
      if (n) running.push_back(n->id());
    }
    std::sort(running.begin(), running.end());
    std::optional<std::pair<uint64_t, uint64_t>> stamp;
    for (const auto& n : nodes_) {
      if (!n) continue;
      const ClusterSnapshot s = n->Snapshot();
      std::vector<NodeId> alive;
      for (const MemberView& m : s.members) {
        if (m.liveness == Liveness::kAlive) alive.push_back(m.id);
      }
      std::sort(alive.begin(), alive.end());
      if (alive != running || s.leader != running.front()) return false;
      std::vector<NodeId> agreed;
      for (const StateMember& m : s.state.members) agreed.push_back(m.id);
      if (agreed != running || s.state.leader != running.front()) return false;
      if (stamp && *stamp != std::make_pair(s.state.term, s.state.version)) return false;
      stamp = std::make_pair(s.state.term, s.state.version);
    }
    return true;
  }

  int IndexOfLeader() const {
    NodeId leader;
    for (const auto& n : nodes_) {
      if (n) {
        leader = n->Snapshot().leader;
        break;
      }
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i] && nodes_[i]->id() == leader) return static_cast<int>(i);
    }
    return -1;
  }

  static constexpr uint64_t kSuspectMs = 600;
  static constexpr uint64_t kDeadMs = 1500;

  Logger log_{LogLevel::kWarn};
  ManualClock manual_;
  const Clock* clock_ = &Clock::Real();
  std::mutex events_mutex_;
  std::vector<std::pair<int, MemberChange>> events_;  // (observer, change)
  int port_ = 0;
  std::string dir_;
  std::vector<std::unique_ptr<ClusterNode>> nodes_;
};

TEST_F(ClusterTest, ConvergesOnOneLeaderAndState) {
  StartNodes(4);
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  const ClusterSnapshot s = nodes_[2]->Snapshot();
  EXPECT_EQ(s.members.size(), 4u);
  EXPECT_TRUE(s.members[0].is_self);
  EXPECT_EQ(s.members[0].id, nodes_[2]->id());
  for (const MemberView& m : s.members) {
    EXPECT_GT(m.profile.memory_total_bytes, 0) << m.name;
    EXPECT_GT(m.profile.cores, 0) << m.name;
  }
  // Nothing was dropped between nodes sharing the secret.
  for (const auto& n : nodes_) EXPECT_EQ(n->Snapshot().counters.dropped_total(), 0u);
  // Links get measured: latency by ping, bandwidth by TCP probe, to every peer.
  ASSERT_TRUE(WaitUntil([&] {
    const ClusterSnapshot snap = nodes_[1]->Snapshot();
    if (snap.members[0].links.size() != 3) return false;
    for (const LinkMeasurement& l : snap.members[0].links) {
      if (!(l.latency_s > 0 && l.bandwidth_Bps > 0)) return false;
    }
    return true;
  }, 10000));
  // Every member's published profile and links feed the planner's spec.
  ClusterSnapshot measured;
  ASSERT_TRUE(WaitUntil([&] {
    measured = nodes_[3]->Snapshot();
    return MeasuredClusterSpec(measured, plan::StackProfile{}).ok();
  }, 10000));
  auto spec = MeasuredClusterSpec(measured, plan::StackProfile{});
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->nodes.size(), 4u);
  EXPECT_EQ(spec->nodes[0].name, "node3");
  for (const plan::NodeProfile& n : spec->nodes) EXPECT_GT(n.flops, 0) << n.name;
  EXPECT_GT(spec->link.bandwidth_Bps, 0);
  EXPECT_GT(spec->link.latency_s, 0);
  const nlohmann::json j = SnapshotToJson(nodes_[1]->Snapshot());
  EXPECT_EQ(j["members"].size(), 4u);
  EXPECT_EQ(j["state"]["members"].size(), 4u);
  EXPECT_EQ(j["leader"], nodes_[IndexOfLeader()]->id().Hex());
}

TEST_F(ClusterTest, OnePeerIsEnoughToJoin) {
  nodes_.resize(4);
  for (int i = 0; i < 4; ++i) {
    ClusterOptions o = Options(i, 4);
    o.peers.clear();
    if (i > 0) o.peers = {Address(0)};  // everyone knows node 0 only; node 0 knows no one
    auto node = ClusterNode::Start(o, &log_);
    ASSERT_TRUE(node.ok()) << node.status().ToString();
    nodes_[static_cast<size_t>(i)] = std::move(*node);
  }
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
}

TEST_F(ClusterTest, ChangesProposedAnywhereReachEveryNode) {
  StartNodes(3);
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  const int leader = IndexOfLeader();
  const int follower = (leader + 1) % 3;
  auto v1 = nodes_[follower]->ProposeChange({ChangeKind::kPutModel, "stories", {{"path", "/m/stories.gguf"}}});
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  auto v2 = nodes_[leader]->ProposeChange({ChangeKind::kPutPlacement, "inst-1", {{"model", "stories"}}});
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  EXPECT_EQ(*v2, *v1 + 1);  // numbered in the order the leader received them
  const int other = (leader + 2) % 3;
  EXPECT_TRUE(nodes_[other]->WaitForState([&](const ClusterState& s) { return s.version >= *v2; }, 5000));
  EXPECT_EQ(nodes_[other]->Snapshot().state.placements.count("inst-1"), 1u);
  EXPECT_FALSE(nodes_[other]->WaitForState([](const ClusterState& s) { return s.models.count("never"); }, 100));
  auto bad = nodes_[follower]->ProposeChange({ChangeKind::kDeleteModel, "absent", {}});
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(WaitUntil([&] {
    for (const auto& n : nodes_) {
      const ClusterState s = n->Snapshot().state;
      if (s.version != *v2 || !s.models.count("stories") || !s.placements.count("inst-1")) return false;
    }
    return true;
  }, 5000));
  EXPECT_EQ(nodes_[(leader + 2) % 3]->Snapshot().state.models.at("stories")["path"], "/m/stories.gguf");
}

TEST_F(ClusterTest, StoppedLeaderIsSuspectThenDeadIsReplacedAndRejoinsWithItsId) {
  UseManualClock();
  StartNodes(4);
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  auto v = nodes_[0]->ProposeChange({ChangeKind::kPutModel, "m", {{"path", "/x"}}});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  const int leader = IndexOfLeader();
  const NodeId old_id = nodes_[leader]->id();
  const uint64_t old_term = nodes_[leader]->Snapshot().state.term;

  // The manual clock stands still until now, so the stopped node was last heard at this very
  // time: every step below is exactly how long it has been silent.
  const auto stopped_at = std::chrono::steady_clock::now();
  nodes_[leader].reset();  // stops it
  auto silent_seen_ms = [&](int observer) -> uint64_t {
    for (const MemberView& m : nodes_[static_cast<size_t>(observer)]->Snapshot().members) {
      if (m.id == old_id) return m.silent_ms;
    }
    return 0;
  };
  const int observer = (leader + 1) % 4;
  constexpr auto kStep = std::chrono::milliseconds(300);
  static_assert(kStep.count() < kSuspectMs && kDeadMs % kStep.count() == 0);
  uint64_t silent_ms = 0;
  while (silent_ms + kStep.count() < kSuspectMs) {
    ASSERT_TRUE(AdvanceAndSettle(kStep));
    silent_ms += kStep.count();
    EXPECT_TRUE(AllSee(old_id, Liveness::kAlive)) << "suspect after only " << silent_ms << " ms";
    EXPECT_EQ(silent_seen_ms(observer), silent_ms);  // the manual clock's, to the millisecond
  }
  while (silent_ms < kSuspectMs) {
    ASSERT_TRUE(AdvanceAndSettle(kStep));
    silent_ms += kStep.count();
  }
  EXPECT_TRUE(WaitUntil([&] { return AllSee(old_id, Liveness::kSuspect); }, 5000));
  while (silent_ms + kStep.count() < kDeadMs) {
    ASSERT_TRUE(AdvanceAndSettle(kStep));
    silent_ms += kStep.count();
    EXPECT_TRUE(AllSee(old_id, Liveness::kSuspect)) << "not suspect at " << silent_ms << " ms";
  }
  ASSERT_TRUE(AdvanceAndSettle(kStep));
  ASSERT_TRUE(WaitUntil([&] { return AllSee(old_id, Liveness::kDead); }, 5000));
  // Dead in less real time than the dead timeout: the manual clock, not the real one, ran it.
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::milliseconds(kDeadMs));
  EXPECT_EQ(CountEvents(old_id, MemberEvent::kSuspect), 3u);  // one per running node
  EXPECT_EQ(CountEvents(old_id, MemberEvent::kDead), 3u);
  // Their own heartbeats kept the running nodes alive through all of it.
  EXPECT_EQ(CountLivenessLossesOfRunning(), 0u);

  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  const int new_leader = IndexOfLeader();
  ASSERT_NE(new_leader, leader);
  const ClusterState after = nodes_[new_leader]->Snapshot().state;
  EXPECT_GT(after.term, old_term);
  EXPECT_GT(after.version, *v);           // the sequence continues...
  EXPECT_EQ(after.models.count("m"), 1u);  // ...and keeps what was agreed before

  StartNode(leader, 4);
  EXPECT_EQ(nodes_[leader]->id(), old_id);  // the same state dir, the same id
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  EXPECT_EQ(IndexOfLeader(), leader);  // the lowest id leads again
  EXPECT_EQ(nodes_[leader]->Snapshot().state.models.count("m"), 1u);
  // A new boot time (the clock moved on) tells the others it restarted rather than recovered.
  EXPECT_TRUE(WaitUntil([&] { return CountEvents(old_id, MemberEvent::kRejoined) == 3; }, 5000));
}

TEST_F(ClusterTest, WrongSecretNeverJoins) {
  UseManualClock();
  nodes_.resize(4);
  for (int i = 0; i < 3; ++i) StartNode(i, 4);
  auto intruder = ClusterNode::Start(Options(3, 4, "wrong secret"), &log_);
  ASSERT_TRUE(intruder.ok()) << intruder.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  // Past the dead timeout: the three keep each other alive, and however long the intruder
  // keeps knocking it is never let in.
  for (int step = 0; step < 6; ++step) ASSERT_TRUE(AdvanceAndSettle(std::chrono::milliseconds(300)));
  EXPECT_TRUE(Converged());
  EXPECT_EQ(CountLivenessLossesOfRunning(), 0u);
  auto bad_macs = [&](int i) {
    return nodes_[static_cast<size_t>(i)]->Snapshot().counters.dropped[static_cast<size_t>(DropReason::kBadMac)];
  };
  for (int i = 0; i < 3; ++i) {
    const ClusterSnapshot s = nodes_[static_cast<size_t>(i)]->Snapshot();
    EXPECT_EQ(s.members.size(), 3u);
    for (const MemberView& m : s.members) EXPECT_NE(m.id, (*intruder)->id());
    EXPECT_GT(bad_macs(i), 0u);
  }
  const ClusterSnapshot lone = (*intruder)->Snapshot();
  EXPECT_EQ(lone.members.size(), 1u);  // only itself
  EXPECT_GT(lone.counters.dropped[static_cast<size_t>(DropReason::kBadMac)], 0u);
  // Alone, the intruder leads a cluster of one: its change stays there. Its heartbeats after
  // the change advertise the new version; once a few of those have been dropped by each node,
  // none of them fetched or took the state.
  ASSERT_TRUE((*intruder)->ProposeChange({ChangeKind::kPutModel, "evil", {{"a", 1}}}, 500).ok());
  std::vector<uint64_t> before(3);
  for (int i = 0; i < 3; ++i) before[static_cast<size_t>(i)] = bad_macs(i);
  ASSERT_TRUE(WaitUntil([&] {
    for (int i = 0; i < 3; ++i) {
      if (bad_macs(i) < before[static_cast<size_t>(i)] + 3) return false;
    }
    return true;
  }, 5000));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(nodes_[static_cast<size_t>(i)]->Snapshot().state.models.count("evil"), 0u);
}

void SendUdp(const std::string& to, std::span<const uint8_t> bytes) {
  auto addr = SocketAddress::Parse(to);
  ASSERT_TRUE(addr.ok());
  Fd fd(::socket(AF_INET, SOCK_DGRAM, 0));
  ::sendto(fd.get(), bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&addr->addr),
           sizeof(addr->addr));
}

void SendTcp(const std::string& to, std::span<const uint8_t> bytes, bool linger_ms_open = false) {
  auto addr = SocketAddress::Parse(to);
  ASSERT_TRUE(addr.ok());
  auto fd = comm::ConnectTcp(*addr, comm::DeadlineAfter(std::chrono::milliseconds(1000)));
  if (!fd.ok()) return;  // refused under load is fine: the point is it does no harm
  (void)comm::WriteAll(fd->get(), std::as_bytes(bytes), comm::DeadlineAfter(std::chrono::milliseconds(1000)));
  if (linger_ms_open) std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

TEST_F(ClusterTest, GarbageIsDroppedCountedAndHarmless) {
  StartNodes(3);
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 10000));
  const ClusterSnapshot before = nodes_[0]->Snapshot();
  std::mt19937 rng(1234);
  std::vector<uint8_t> junk;
  auto fill = [&](size_t n) {
    junk.resize(n);
    for (uint8_t& b : junk) b = static_cast<uint8_t>(rng());
  };
  // Random datagrams of random sizes, and some that start like ours.
  for (int i = 0; i < 300; ++i) {
    fill(1 + rng() % 1500);
    if (i % 3 == 0 && junk.size() > 8) {
      junk[0] = 'C', junk[1] = 'H', junk[2] = 'C', junk[3] = 'P', junk[4] = kWireVersion, junk[5] = 1;
      junk[6] = junk[7] = 0;
    }
    SendUdp(Address(0), junk);
    // Paced, so the kernel's socket buffer (not the node) does not drop a loaded burst.
    if (i % 20 == 19) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // A well-formed message signed with the wrong key, and an oversized datagram.
  auto wrong = DeriveClusterKey("not the secret");
  ASSERT_TRUE(wrong.ok());
  Message forged;
  forged.type = MessageType::kHeartbeat;
  forged.sender = NodeId::Random();
  forged.payload = R"({"name":"x","boot":1,"term":99,"version":99})";
  SendUdp(Address(0), EncodeMessage(*wrong, forged));
  fill(kMaxMessageBytes + 100);
  SendUdp(Address(0), junk);
  // An authentic message sent twice: the copy is a replay.
  auto right = DeriveClusterKey(kSecret);
  ASSERT_TRUE(right.ok());
  Message request;
  request.type = MessageType::kStateRequest;
  request.sender = NodeId::Random();
  request.payload = "{}";
  const std::vector<uint8_t> once = EncodeMessage(*right, request);
  SendUdp(Address(0), once);
  SendUdp(Address(0), once);
  // An authentic message stamped an hour ago.
  request.timestamp_ms = Clock::Real().WallMs() - 3600 * 1000;
  SendUdp(Address(0), EncodeMessage(*right, request));
  // TCP: random bytes, a silent connection, a header claiming a huge payload, a forged propose.
  fill(4096);
  SendTcp(Address(0), junk);
  SendTcp(Address(0), {}, /*linger=*/true);
  std::vector<uint8_t> huge_header = EncodeMessage(*right, request);
  huge_header[8] = huge_header[9] = huge_header[10] = 0xff;
  huge_header.resize(kWireHeaderBytes);
  SendTcp(Address(0), huge_header);
  Message propose;
  propose.type = MessageType::kPropose;
  propose.sender = NodeId::Random();
  propose.payload = R"({"change":{"op":"put_model","key":"evil","value":{}}})";
  SendTcp(Address(IndexOfLeader()), EncodeMessage(*wrong, propose));

  auto dropped = [&](DropReason r) {
    return nodes_[0]->Snapshot().counters.dropped[static_cast<size_t>(r)];
  };
  ASSERT_TRUE(WaitUntil([&] {
    return dropped(DropReason::kMalformed) >= 200 && dropped(DropReason::kBadMac) >= 1 &&
           dropped(DropReason::kTooLarge) >= 2 && dropped(DropReason::kReplay) == 1 &&
           dropped(DropReason::kStale) == 1;
  }, 5000)) << SnapshotToJson(nodes_[0]->Snapshot())["counters"].dump();
  // The cluster did not notice: same members, leader and term; no forged entry. Each node
  // first acts on several rounds of its peers' heartbeats after the garbage, so an effect of
  // the garbage would have had time to show.
  std::vector<uint64_t> accepted;
  for (const auto& n : nodes_) accepted.push_back(n->Snapshot().counters.accepted);
  ASSERT_TRUE(WaitUntil([&] {
    for (size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->Snapshot().counters.accepted < accepted[i] + 10) return false;
    }
    return true;
  }, 5000));
  ASSERT_TRUE(WaitUntil([&] { return Converged(); }, 5000));
  const ClusterSnapshot after = nodes_[0]->Snapshot();
  EXPECT_EQ(after.leader, before.leader);
  EXPECT_EQ(after.state.term, before.state.term);
  EXPECT_EQ(after.members.size(), 3u);
  for (const auto& n : nodes_) EXPECT_EQ(n->Snapshot().state.models.count("evil"), 0u);
  // And it still works.
  auto v = nodes_[1]->ProposeChange({ChangeKind::kPutModel, "ok", {{"path", "/p"}}});
  EXPECT_TRUE(v.ok()) << v.status().ToString();
}

}  // namespace
}  // namespace cohort::cluster
