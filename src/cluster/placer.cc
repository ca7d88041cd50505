// Placer; see placer.h.
#include "cluster/placer.h"

#include <algorithm>
#include <cstring>

#include "engine/serving.h"

namespace cohort::cluster {
namespace {

constexpr int kProposeTimeoutMs = 3000;
constexpr uint64_t kUnplacedRetryMs = 10000;
constexpr uint64_t kServiceWaitMs = 5000;

// The first link the leader measured to a peer, or a LAN default before any measurement.
// The leader's, not this node's: the leader places, and a preview on another node
// (POST /v1/plan) must score with the link the placement will use.
plan::LinkProfile LinkOf(const ClusterSnapshot& snap) {
  for (const MemberView& m : snap.members) {
    if (m.id != snap.leader) continue;
    for (const LinkMeasurement& l : m.links) {
      if (l.latency_s > 0 && l.bandwidth_Bps > 0) return ToLinkProfile("measured", l);
    }
  }
  plan::LinkProfile link;
  link.name = "default";
  link.latency_s = 100e-6;
  link.bandwidth_Bps = 1e9 / 8;
  return link;
}

}  // namespace

Placer::LiveSet Placer::Live(const ClusterSnapshot& snap) {
  const Records records = Records::Of(snap.state);
  LiveSet live;
  for (const MemberView& m : snap.members) {
    if (m.liveness == Liveness::kDead) continue;
    live.present.insert(m.id.Hex());
    if (m.liveness != Liveness::kAlive) continue;
    ++live.alive;
    auto service = records.nodes.find(m.id.Hex());
    if (service == records.nodes.end()) continue;
    PlacementNode n;
    n.service = service->second;
    n.profile = BudgetProfile(m.name, m.profile.memory_total_bytes, m.profile.memory_available_bytes,
                              m.profile.memory_bandwidth_Bps, m.profile.matmul_flops,
                              service->second.max_memory_bytes);
    live.signature += NodeServiceToJson(service->second).dump() + ";";
    live.candidates.push_back(std::move(n));
  }
  return live;
}

std::optional<std::string> Placer::WhyPlace(const Instance& inst, const std::optional<RunReport>& run,
                                            const LiveSet& live, uint64_t now) {
  const std::string& id = inst.id;
  const uint64_t last = last_try_ms_.count(id) ? last_try_ms_[id] : 0;
  switch (inst.status) {
    case InstanceStatus::kPending: {
      // A node that just joined publishes its services a moment later: wait a little for
      // every alive node to have published before placing.
      if (!pending_since_ms_.count(id)) pending_since_ms_[id] = now;
      if (live.alive > live.candidates.size() && now - pending_since_ms_[id] < kServiceWaitMs) return std::nullopt;
      pending_since_ms_.erase(id);
      return inst.reason;
    }
    case InstanceStatus::kPlaced: {
      for (const RankPlacement& r : inst.ranks) {
        if (live.present.count(r.node) == 0) return "node " + r.name + " left the cluster";
      }
      if (!run.has_value() || run->state != RunState::kFailed) {
        failed_since_ms_.erase(id);
        return std::nullopt;
      }
      if (!failed_since_ms_.count(id)) failed_since_ms_[id] = now;
      // A rank on a node that is not alive (suspect): no need to wait for the membership.
      bool rank_not_alive = false;
      for (const RankPlacement& r : inst.ranks) {
        rank_not_alive |= std::none_of(live.candidates.begin(), live.candidates.end(),
                                       [&](const PlacementNode& n) { return n.service.id == r.node; });
      }
      const bool settled = rank_not_alive || now - failed_since_ms_[id] >= static_cast<uint64_t>(options_.failure_settle_ms);
      if (settled && now - last >= static_cast<uint64_t>(options_.replace_backoff_ms)) {
        failed_since_ms_.erase(id);
        return "the coordinator reported: " + run->error;
      }
      return std::nullopt;
    }
    case InstanceStatus::kUnplaced:  // again when the live set changes, and now and then
      if (tried_on_[id] != live.signature || now - last >= kUnplacedRetryMs) return std::string("the live nodes changed");
      return std::nullopt;
  }
  return std::nullopt;
}

Result<PlacementInput> Placer::InputFor(const ClusterSnapshot& snap, const Records& records, const LiveSet& live,
                                        const Instance& instance, const PlacerOptions& options) {
  auto m = records.models.find(instance.model);
  if (m == records.models.end()) return NotFound("model '" + instance.model + "' is not registered");
  const ModelEntry& model = m->second;
  PlacementInput in;
  in.model = model;
  in.layout = instance.layout;
  in.nodes = instance.nodes;
  const int model_ctx = std::min(model.n_ctx_train > 0 ? model.n_ctx_train : engine::kDefaultMaxContext,
                                 engine::kDefaultMaxContext);
  in.context_tokens = options.context_tokens > 0 ? options.context_tokens : model_ctx;
  in.sequences = options.sequences;
  in.candidates = live.candidates;
  in.link = LinkOf(snap);
  return in;
}

Status Placer::PlaceOn(const ClusterSnapshot& snap, const Records& records, const LiveSet& live,
                       Instance* next) {
  COHORT_ASSIGN_OR_RETURN(PlacementInput in, InputFor(snap, records, live, *next, options_));
  return PlaceInstance(in, next);
}

void Placer::Lead(const ClusterSnapshot& snap, uint64_t now) {
  if (snap.leader != snap.self) return;
  const LiveSet live = Live(snap);
  const Records records = Records::Of(snap.state);
  for (const auto& [id, instance] : records.instances) {
    const Instance* inst = &instance;
    std::optional<RunReport> run;
    if (auto r = records.runs.find(id); r != records.runs.end() && r->second.epoch == inst->epoch) run = r->second;
    const std::optional<std::string> reason = WhyPlace(*inst, run, live, now);
    if (!reason.has_value()) continue;
    Instance next = *inst;
    next.epoch = inst->epoch + 1;
    const Status placed = PlaceOn(snap, records, live, &next);
    last_try_ms_[id] = now;
    tried_on_[id] = live.signature;
    if (!placed.ok()) {
      next.status = InstanceStatus::kUnplaced;
      next.reason = placed.message();
      next.ranks.clear();
      next.coordinator.clear();
      next.plan = plan::ShardPlan{};
      // Nothing new to say: do not write the same verdict again.
      if (inst->status == InstanceStatus::kUnplaced && inst->reason == next.reason) continue;
    } else {
      next.reason = *reason;
    }
    auto version = node_.ProposeChange(PutInstance(next), kProposeTimeoutMs);
    if (version.ok()) {
      log_.Info("instance {} epoch {}: {} {}", id, next.epoch, InstanceStatusName(next.status),
                next.status == InstanceStatus::kPlaced ? next.plan_label : next.reason);
    }
  }
  // Reports of instances that are gone.
  for (const auto& [id, run] : records.runs) {
    if (records.instances.count(id) == 0) (void)node_.ProposeChange(DeleteRunReport(id), kProposeTimeoutMs);
  }
}

}  // namespace cohort::cluster
