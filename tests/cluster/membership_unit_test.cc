// The control plane's pure parts: wire encoding and authentication, the replay guard, node
// ids kept in a state directory, the agreed state's numbered changes, liveness and the leader
// rule, and profile parsing/conversion.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cluster/cluster_state.h"
#include "cluster/member_table.h"
#include "cluster/node_id.h"
#include "cluster/profile.h"
#include "cluster/wire.h"
#include "comm/socket_util.h"
#include "core/clock.h"
#include "kernels/quant.h"

namespace cohort::cluster {
namespace {

using comm::SocketAddress;

NodeId IdWithByte(uint8_t first) {
  NodeId id;
  id.bytes[0] = first;
  id.bytes[15] = 1;
  return id;
}

Message MakeMessage(const std::string& payload) {
  Message m;
  m.type = MessageType::kHeartbeat;
  m.sender = IdWithByte(7);
  m.payload = payload;
  return m;
}

TEST(Wire, RoundTripsAndAuthenticates) {
  auto key = DeriveClusterKey("s3cret");
  ASSERT_TRUE(key.ok());
  const std::vector<uint8_t> bytes = EncodeMessage(*key, MakeMessage(R"({"a":1})"));
  EXPECT_EQ(bytes.size(), kWireHeaderBytes + 7 + kWireMacBytes);
  Message out;
  ASSERT_EQ(DecodeMessage(*key, bytes, &out), DecodeError::kNone);
  EXPECT_EQ(out.payload, R"({"a":1})");
  EXPECT_EQ(out.sender, IdWithByte(7));
  EXPECT_NE(out.nonce, 0u);
  EXPECT_NEAR(static_cast<double>(out.timestamp_ms), static_cast<double>(Clock::Real().WallMs()), 5000.0);

  auto other = DeriveClusterKey("s3creT");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(DecodeMessage(*other, bytes, &out), DecodeError::kBadMac);
  // Flipping any single byte, header or payload or MAC, must fail.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x01;
    EXPECT_NE(DecodeMessage(*key, bad, &out), DecodeError::kNone) << "byte " << i;
  }
}

TEST(Wire, StampsWithTheClockItIsGiven) {
  auto key = DeriveClusterKey("s3cret");
  ASSERT_TRUE(key.ok());
  ManualClock clock;
  clock.Advance(std::chrono::hours(2));
  const std::vector<uint8_t> bytes = EncodeMessage(*key, MakeMessage("{}"), clock);
  Message out;
  ASSERT_EQ(DecodeMessage(*key, bytes, &out), DecodeError::kNone);
  EXPECT_EQ(out.timestamp_ms, clock.WallMs());
  // Two hours ahead of the real clock: stale to a node on real time, fresh on the same clock.
  ReplayGuard guard(/*window_ms=*/30000);
  EXPECT_EQ(guard.Check(out, Clock::Real().WallMs()), ReplayGuard::Verdict::kStale);
  EXPECT_EQ(guard.Check(out, clock.WallMs()), ReplayGuard::Verdict::kAccept);
}

TEST(Wire, RejectsBadFraming) {
  auto key = DeriveClusterKey("k");
  ASSERT_TRUE(key.ok());
  std::vector<uint8_t> bytes = EncodeMessage(*key, MakeMessage("{}"));
  Message out;
  EXPECT_EQ(DecodeMessage(*key, std::span(bytes.data(), 10), &out), DecodeError::kTooShort);
  EXPECT_EQ(DecodeMessage(*key, std::span(bytes.data(), bytes.size() - 1), &out), DecodeError::kBadLength);
  std::vector<uint8_t> huge(kMaxMessageBytes + 1, 0);
  EXPECT_EQ(DecodeMessage(*key, huge, &out), DecodeError::kTooLarge);
  std::vector<uint8_t> v = bytes;
  v[4] = 2;
  EXPECT_EQ(DecodeMessage(*key, v, &out), DecodeError::kBadVersion);
  v = bytes;
  v[5] = 200;
  EXPECT_EQ(DecodeMessage(*key, v, &out), DecodeError::kBadType);
  v = bytes;
  v[0] = 'X';
  EXPECT_EQ(DecodeMessage(*key, v, &out), DecodeError::kBadMagic);
  EXPECT_EQ(PeekPayloadBytes(bytes), 2u);
  EXPECT_EQ(PeekPayloadBytes(v), 0u);
  EXPECT_FALSE(DeriveClusterKey("").ok());
}

TEST(ReplayGuard, RejectsReplaysStaleAndBoundsMemory) {
  ReplayGuard guard(/*window_ms=*/1000, /*max_senders=*/2, /*max_per_sender=*/3);
  Message m = MakeMessage("{}");
  m.timestamp_ms = 100000;
  m.nonce = 1;
  EXPECT_EQ(guard.Check(m, 100000), ReplayGuard::Verdict::kAccept);
  EXPECT_EQ(guard.Check(m, 100001), ReplayGuard::Verdict::kReplay);
  m.nonce = 2;
  EXPECT_EQ(guard.Check(m, 101001), ReplayGuard::Verdict::kStale);  // 1001 ms old
  m.timestamp_ms = 102500;
  EXPECT_EQ(guard.Check(m, 101000), ReplayGuard::Verdict::kStale);  // from the future
  m.timestamp_ms = 100500;
  EXPECT_EQ(guard.Check(m, 100500), ReplayGuard::Verdict::kAccept);
  m.nonce = 3;
  EXPECT_EQ(guard.Check(m, 100500), ReplayGuard::Verdict::kAccept);
  m.nonce = 4;
  EXPECT_EQ(guard.Check(m, 100500), ReplayGuard::Verdict::kFull);  // 3 nonces live
  // Once the early ones expire there is room again, and the old nonce is forgotten only
  // when a replay of it would be stale anyway.
  EXPECT_EQ(guard.Check(m, 101200), ReplayGuard::Verdict::kAccept);
  Message b = MakeMessage("{}");
  b.sender = IdWithByte(9);
  b.timestamp_ms = 101200;
  b.nonce = 1;
  EXPECT_EQ(guard.Check(b, 101200), ReplayGuard::Verdict::kAccept);
  b.sender = IdWithByte(10);
  EXPECT_EQ(guard.Check(b, 101200), ReplayGuard::Verdict::kFull);  // third sender
}

TEST(NodeId, PersistsInStateDir) {
  const std::string dir = ::testing::TempDir() + "/cohort_node_id_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto a = LoadOrCreateNodeId(dir);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = LoadOrCreateNodeId(dir);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_FALSE(a->IsZero());
  auto fresh = LoadOrCreateNodeId("");
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(*fresh, *a);
  auto parsed = NodeId::FromHex(a->Hex());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, *a);
  { std::ofstream(dir + "/node_id") << "not-hex"; }
  EXPECT_EQ(LoadOrCreateNodeId(dir).status().code(), StatusCode::kCorrupt);
  std::filesystem::remove_all(dir);
}

TEST(ClusterState, AppliesNumberedChangesAndRoundTrips) {
  ClusterState s;
  s.term = 3;
  s.leader = IdWithByte(1);
  ASSERT_TRUE(s.Apply({ChangeKind::kPutModel, "stories", {{"path", "/m.gguf"}}}).ok());
  ASSERT_TRUE(s.Apply({ChangeKind::kPutPlacement, "inst-1", {{"ranks", 3}}}).ok());
  EXPECT_EQ(s.version, 2u);
  EXPECT_EQ(s.Apply({ChangeKind::kDeleteModel, "nope", {}}).code(), StatusCode::kNotFound);
  EXPECT_EQ(s.Apply({ChangeKind::kPutModel, "", {{"a", 1}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Apply({ChangeKind::kPutModel, "x", 5}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.version, 2u);  // refused changes take no number
  EXPECT_TRUE(s.SetMembers({{IdWithByte(2), "b", "1.2.3.4:1"}, {IdWithByte(1), "a", "1.2.3.4:2"}}));
  EXPECT_FALSE(s.SetMembers({{IdWithByte(1), "a", "1.2.3.4:2"}, {IdWithByte(2), "b", "1.2.3.4:1"}}));
  EXPECT_EQ(s.version, 3u);
  EXPECT_EQ(s.members[0].id, IdWithByte(1));  // sorted
  ASSERT_TRUE(s.Apply({ChangeKind::kDeleteModel, "stories", {}}).ok());

  auto back = StateFromJson(StateToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->term, 3u);
  EXPECT_EQ(back->version, 4u);
  EXPECT_EQ(back->members, s.members);
  EXPECT_EQ(back->placements.at("inst-1")["ranks"], 3);
  EXPECT_TRUE(back->models.empty());
  ASSERT_EQ(back->log.size(), 4u);
  EXPECT_EQ(back->log.back().summary, "delete_model stories");

  ClusterState newer_term;
  newer_term.term = 4;
  EXPECT_TRUE(newer_term.NewerThan(s));  // a new term wins over a longer old one
  EXPECT_FALSE(s.NewerThan(newer_term));
  EXPECT_FALSE(StateFromJson(nlohmann::json{{"term", "x"}}).ok());

  auto change = ChangeFromJson(ChangeToJson({ChangeKind::kPutPlacement, "i", {{"k", 1}}}));
  ASSERT_TRUE(change.ok());
  EXPECT_EQ(change->kind, ChangeKind::kPutPlacement);
  EXPECT_FALSE(ChangeFromJson(nlohmann::json{{"op", "drop_all"}, {"key", "k"}}).ok());
}

TEST(MemberTable, LivenessTimeoutsAndLeader) {
  const NodeId self = IdWithByte(5);
  MemberTable table(self, /*max_members=*/2, {100, 300, 1000});
  std::vector<MemberChange> changes;
  Member a;
  a.id = IdWithByte(3);
  a.name = "a";
  a.boot_ms = 1;
  ASSERT_TRUE(table.Heard(a, 0, &changes));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].event, MemberEvent::kJoined);
  EXPECT_EQ(table.Leader(), a.id);  // lower than self

  changes.clear();
  table.Tick(150, &changes);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].event, MemberEvent::kSuspect);
  EXPECT_EQ(table.Leader(), a.id);  // suspects keep the leadership
  changes.clear();
  table.Tick(300, &changes);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].event, MemberEvent::kDead);
  EXPECT_EQ(table.Leader(), self);

  changes.clear();
  ASSERT_TRUE(table.Heard(a, 400, &changes));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].event, MemberEvent::kRecovered);
  a.boot_ms = 2;
  changes.clear();
  ASSERT_TRUE(table.Heard(a, 410, &changes));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].event, MemberEvent::kRejoined);

  // Full of live members: a newcomer is refused, never a live member evicted.
  Member b = a, c = a;
  b.id = IdWithByte(8);
  c.id = IdWithByte(9);
  ASSERT_TRUE(table.Heard(b, 420, &changes));
  EXPECT_FALSE(table.Heard(c, 420, &changes));
  EXPECT_EQ(table.size(), 2u);
  // Once b is dead it makes room.
  ASSERT_TRUE(table.Heard(a, 800, &changes));
  table.Tick(800, &changes);
  EXPECT_EQ(table.Find(b.id)->liveness, Liveness::kDead);
  EXPECT_TRUE(table.Heard(c, 800, &changes));
  EXPECT_EQ(table.Find(b.id), nullptr);
  // Dead members are forgotten after dead_ms + forget_ms of silence.
  changes.clear();
  table.Tick(800 + 1300, &changes);  // silent 1300 ms: first dead...
  EXPECT_EQ(table.size(), 2u);
  table.Tick(800 + 1300, &changes);  // ...then, dead for long enough, forgotten
  EXPECT_EQ(table.size(), 0u);
}

TEST(Profile, ParsesMeminfoAndFillsPlannerProfiles) {
  double total = 0, avail = 0;
  ASSERT_TRUE(ParseMeminfo("MemTotal:       16000 kB\nMemFree: 1 kB\nMemAvailable:    4000 kB\n",
                           &total, &avail).ok());
  EXPECT_EQ(total, 16000.0 * 1024);
  EXPECT_EQ(avail, 4000.0 * 1024);
  EXPECT_FALSE(ParseMeminfo("MemTotal: 5 kB\n", &total, &avail).ok());

  ProfileOptions small;
  small.bandwidth_buffer_bytes = 4 << 20;
  small.bandwidth_passes = 2;
  small.matmul_dim = 256;
  small.matmul_tokens = 4;
  small.threads = 2;
  auto p = MeasureResources(small);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->measured);
  EXPECT_GT(p->memory_total_bytes, 0);
  EXPECT_GT(p->memory_available_bytes, 0);
  EXPECT_LE(p->memory_available_bytes, p->memory_total_bytes);
  EXPECT_GT(p->cores, 0);
  EXPECT_GT(p->memory_bandwidth_Bps, 1e8);  // any machine streams more than 100 MB/s
  EXPECT_GT(p->matmul_flops, 1e7);
  const plan::NodeProfile node = ToNodeProfile("me", *p);
  EXPECT_TRUE(node.Validate().ok()) << node.Validate().ToString();
  const ResourceProfile back = ResourceFromJson(ResourceToJson(*p));
  EXPECT_EQ(back.matmul_flops, p->matmul_flops);
  EXPECT_EQ(back.cores, p->cores);
  // The kernels' level travels with the profile a node publishes.
  EXPECT_EQ(p->simd, kernels::SimdLevelName(kernels::BestSimdLevel()));
  EXPECT_EQ(back.simd, p->simd);

  LinkMeasurement m;
  m.latency_s = 50e-6;
  m.bandwidth_Bps = 1e9;
  EXPECT_TRUE(ToLinkProfile("l", m).Validate().ok());
}

TEST(SocketAddress, ParsesAndRefusesLookupsFromMessages) {
  auto a = SocketAddress::Parse("10.1.2.3:7946");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->ToString(), "10.1.2.3:7946");
  EXPECT_EQ(a->port(), 7946);
  EXPECT_FALSE(a->IsAny());
  EXPECT_TRUE(SocketAddress::Parse("0.0.0.0:1")->IsAny());
  EXPECT_TRUE(SocketAddress::Parse("localhost:5").ok());
  EXPECT_FALSE(SocketAddress::ParseNumeric("localhost:5").ok());
  EXPECT_TRUE(SocketAddress::ParseNumeric("127.0.0.1:5").ok());
  for (const char* bad : {"", "host", ":80", "1.2.3.4:", "1.2.3.4:70000", "1.2.3.4:8x"}) {
    EXPECT_FALSE(SocketAddress::Parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace cohort::cluster
