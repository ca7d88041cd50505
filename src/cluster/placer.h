// Placer: the leader's part of the reconcile loop. It places pending instances with the
// planner on the live nodes that published their services, re-places those that lost a node
// or whose coordinator reported a failure (after a back-off), and retries unplaced ones when
// the live set changes. The plan the planner scored travels in the placement as data.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "core/log.h"
#include "core/status.h"

namespace cohort::cluster {

struct PlacerOptions {
  int context_tokens = 0;          // KV per sequence the placement counts (0: the model's, <= 4096)
  int sequences = 4;               // KV slots the placement counts
  int replace_backoff_ms = 2000;   // between re-placements of one instance after a failure
  // A coordinator reports a rank's death at once (its connection is reset), before the
  // membership calls that node suspect: re-placing then would put a rank on the dead node
  // again and wait out its setup timeout. A failure is acted on once it is this old (the
  // suspect timeout), or at once when a rank's node is no longer alive.
  int failure_settle_ms = 1500;
};

class Placer {
 public:
  // Borrowed: `node` and `log` outlive the placer.
  Placer(ClusterNode& node, const PlacerOptions& options, Logger& log) : node_(node), options_(options), log_(log) {}

  // One round as leader over `snap` (nothing when this node does not lead); `now_ms` is a
  // monotonic clock's reading.
  void Lead(const ClusterSnapshot& snap, uint64_t now_ms);

  // The leader's view of the members: who may still hold a rank (not dead), who may get one
  // (alive, services published), and a signature of what placement depends on.
  struct LiveSet {
    std::set<std::string> present;
    std::vector<PlacementNode> candidates;
    size_t alive = 0;
    std::string signature;
  };
  static LiveSet Live(const ClusterSnapshot& snap);
  // What the planner is given to place `instance` now: its model's entry, the live nodes'
  // budgets and the measured link. The leader's rounds and the dashboard's preview
  // (POST /v1/plan) share it, so the preview shows what placing would choose.
  static Result<PlacementInput> InputFor(const ClusterSnapshot& snap, const Records& records, const LiveSet& live,
                                         const Instance& instance, const PlacerOptions& options);

 private:
  // Why `inst` should be (re)placed now, or nothing.
  std::optional<std::string> WhyPlace(const Instance& inst, const std::optional<RunReport>& run,
                                      const LiveSet& live, uint64_t now);
  Status PlaceOn(const ClusterSnapshot& snap, const Records& records, const LiveSet& live, Instance* next);

  ClusterNode& node_;
  PlacerOptions options_;
  Logger& log_;
  // When each instance was last (re)placed, and the live set it was tried against.
  std::map<std::string, uint64_t> last_try_ms_;
  std::map<std::string, std::string> tried_on_;
  std::map<std::string, uint64_t> pending_since_ms_;
  std::map<std::string, uint64_t> failed_since_ms_;  // when a failure of its epoch was first seen
};

}  // namespace cohort::cluster
