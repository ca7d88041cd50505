// ClusterNode's read side: options validation, drop counters, and the snapshot that
// `GET /v1/cluster` and the server read.
#include <algorithm>

#include "cluster/cluster_node.h"

namespace cohort::cluster {

Status ClusterOptions::Validate() const {
  if (secret.empty()) return InvalidArgument("a cluster secret is required (--secret or --secret-file)");
  if (heartbeat_ms < 10 || heartbeat_ms > 60000) return InvalidArgument("heartbeat must be 10..60000 ms");
  if (timeouts.suspect_ms < static_cast<uint64_t>(heartbeat_ms) || timeouts.dead_ms < timeouts.suspect_ms) {
    return InvalidArgument("timeouts must satisfy heartbeat <= suspect <= dead");
  }
  if (max_members < 1 || max_members > kMaxStateMembers) {
    return InvalidArgument("max members must be 1.." + std::to_string(kMaxStateMembers));
  }
  if (peers.size() > 256) return InvalidArgument("at most 256 --peers");
  if (max_packets_per_s < 10) return InvalidArgument("max packets per second must be >= 10");
  if (replay_window_ms < 1000) return InvalidArgument("replay window must be >= 1000 ms");
  if (tcp_timeout_ms < 100) return InvalidArgument("tcp timeout must be >= 100 ms");
  if (max_pending_connections < 1 || max_pending_connections > 1024) {
    return InvalidArgument("pending connections must be 1..1024");
  }
  if (probe_bytes < 1024 || probe_bytes > (size_t{64} << 20)) return InvalidArgument("probe bytes must be 1 KiB..64 MiB");
  if (name.size() > 64) return InvalidArgument("node name longer than 64 characters");
  return Status::Ok();
}

const char* DropReasonName(DropReason r) {
  switch (r) {
    case DropReason::kMalformed: return "malformed";
    case DropReason::kBadMac: return "bad_mac";
    case DropReason::kStale: return "stale";
    case DropReason::kReplay: return "replay";
    case DropReason::kReplayFull: return "replay_full";
    case DropReason::kRateLimited: return "rate_limited";
    case DropReason::kTooLarge: return "too_large";
    case DropReason::kBadPayload: return "bad_payload";
    case DropReason::kTableFull: return "table_full";
    case DropReason::kConnections: return "connections";
    case DropReason::kCount: break;
  }
  return "unknown";
}

uint64_t Counters::dropped_total() const {
  uint64_t total = 0;
  for (uint64_t d : dropped) total += d;
  return total;
}

ClusterSnapshot ClusterNode::Snapshot() const {
  ClusterSnapshot snap;
  snap.self = id_;
  for (size_t i = 0; i < kDropReasonCount; ++i) snap.counters.dropped[i] = dropped_[i].load();
  snap.counters.accepted = accepted_.load();
  snap.counters.sent = sent_.load();
  std::lock_guard<std::mutex> lock(mutex_);
  snap.leader = table_->Leader();
  snap.state = state_;
  MemberView self;
  self.id = id_;
  self.name = options_.name;
  self.address = advertise_.ToString();
  self.is_self = true;
  self.profile = profile_;
  for (const auto& [peer, link] : links_) self.links.push_back(link);
  snap.members.push_back(std::move(self));
  const uint64_t now = clock_->MonotonicMs();
  for (const Member& m : table_->List()) {
    MemberView v;
    v.id = m.id;
    v.name = m.name;
    v.address = m.address;
    v.liveness = m.liveness;
    v.silent_ms = now > m.last_heard_ms ? now - m.last_heard_ms : 0;
    v.profile = m.profile;
    v.links = m.links;
    snap.members.push_back(std::move(v));
  }
  return snap;
}

nlohmann::json SnapshotToJson(const ClusterSnapshot& snap) {
  nlohmann::json members = nlohmann::json::array();
  for (const MemberView& m : snap.members) {
    nlohmann::json links = nlohmann::json::array();
    for (const LinkMeasurement& l : m.links) {
      links.push_back({{"peer", l.peer.Hex()}, {"latency_us", l.latency_s * 1e6},
                       {"bandwidth_Bps", l.bandwidth_Bps}});
    }
    members.push_back({{"id", m.id.Hex()}, {"name", m.name}, {"address", m.address},
                       {"state", LivenessName(m.liveness)}, {"self", m.is_self},
                       {"leader", m.id == snap.leader}, {"silent_ms", m.silent_ms},
                       {"profile", ResourceToJson(m.profile)}, {"links", links}});
  }
  nlohmann::json dropped = nlohmann::json::object();
  for (size_t i = 0; i < kDropReasonCount; ++i) {
    dropped[DropReasonName(static_cast<DropReason>(i))] = snap.counters.dropped[i];
  }
  return {{"self", snap.self.Hex()},
          {"leader", snap.leader.Hex()},
          {"members", members},
          {"state", StateToJson(snap.state)},
          {"counters", {{"accepted", snap.counters.accepted}, {"sent", snap.counters.sent},
                        {"dropped_total", snap.counters.dropped_total()}, {"dropped", dropped}}}};
}

Result<plan::ClusterSpec> MeasuredClusterSpec(const ClusterSnapshot& snapshot, const plan::StackProfile& stack) {
  plan::ClusterSpec spec;
  spec.stack = stack;
  std::vector<NodeId> alive;
  for (const MemberView& m : snapshot.members) {
    if (m.liveness != Liveness::kAlive) continue;
    if (!m.profile.measured) return Unavailable("node " + m.name + " has not measured itself yet");
    spec.nodes.push_back(ToNodeProfile(m.name, m.profile));
    alive.push_back(m.id);
  }
  LinkMeasurement worst;
  bool any = false;
  for (const MemberView& m : snapshot.members) {
    if (m.liveness != Liveness::kAlive) continue;
    for (const LinkMeasurement& l : m.links) {
      if (std::find(alive.begin(), alive.end(), l.peer) == alive.end()) continue;
      if (!(l.latency_s > 0 && l.bandwidth_Bps > 0)) continue;
      worst.latency_s = any ? std::max(worst.latency_s, l.latency_s) : l.latency_s;
      worst.bandwidth_Bps = any ? std::min(worst.bandwidth_Bps, l.bandwidth_Bps) : l.bandwidth_Bps;
      any = true;
    }
  }
  if (alive.size() > 1 && !any) return Unavailable("no link between live nodes measured yet");
  if (any) {
    spec.link = ToLinkProfile("measured", worst);
  } else {
    // One node: no link is used, but the spec still needs a valid one.
    spec.link = ToLinkProfile("none (single node)", {NodeId(), 0, 1e12});
  }
  COHORT_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

}  // namespace cohort::cluster
