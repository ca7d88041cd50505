// The planner: enumerates the layouts a cluster allows (one node, tensor, pipeline, hybrid;
// even shares and shares following node speed within memory), predicts each with the cost
// model, keeps those that fit, ranks them and explains the choice against the runners-up.
#pragma once

#include <string>
#include <vector>

#include "plan/cost_model.h"
#include "plan/hardware.h"
#include "plan/model_shape.h"
#include "core/status.h"

namespace cohort::plan {

enum class Objective {
  kLatency,     // generation tokens/s of one sequence
  kThroughput,  // aggregate generation tokens/s at Workload::batch
  kPrompt,      // prompt tokens/s
};
const char* ObjectiveName(Objective o);
Result<Objective> ParseObjective(const std::string& name);

struct PlanRequest {
  ModelShape model;
  QuantScheme quant;
  ClusterSpec cluster;
  Workload workload;
  Objective objective = Objective::kLatency;
  // "auto" (everything below), "single", "tp", "pp", "hybrid", "tp:W1,W2,..", "pp:W1,W2,..",
  // "hybrid:SxT". Weighted forms use exactly as many nodes as weights.
  std::string layout = "auto";
  // Indices into cluster.nodes that may run global rank 0 (stage 0's first rank, the
  // coordinator); empty: any. A cluster placement names the nodes holding the model file,
  // since rank 0 reads it and streams the others their shares. Every layout then starts
  // with the fastest of them, followed by the rest fastest first.
  std::vector<int> first_rank_nodes;
};

struct RejectedLayout {
  std::string label;
  std::string reason;
};

struct PlanResult {
  std::vector<Prediction> candidates;  // fit in memory, best first
  std::vector<Prediction> too_big;     // valid plans that exceed some node's memory
  std::vector<RejectedLayout> rejected;  // no valid ShardPlan (e.g. quant-block alignment)
  std::string explanation;             // why the best won, and what the runners-up lose
  const Prediction* best() const { return candidates.empty() ? nullptr : &candidates.front(); }
};

// Relative shares for `nodes` (indices into cluster.nodes) proportional to their memory
// bandwidth (generation speed), lowered where a node's memory cannot hold its share of
// `model_bytes`, with the excess handed to the others in proportion to their speed.
std::vector<double> SpeedWeights(const ClusterSpec& cluster, const std::vector<int>& nodes,
                                 double model_bytes);

// The layouts `request.layout` asks for (all of them for "auto").
Result<std::vector<Layout>> EnumerateLayouts(const PlanRequest& request);
// Whether `layout` names layouts that `node_count` nodes of a stack running tensor and
// pipeline parallelism allow: the check an API caller gets before an instance is recorded.
Status CheckLayout(const std::string& layout, int node_count);

Result<PlanResult> PlanLayouts(const PlanRequest& request);

double ObjectiveValue(const Prediction& p, Objective o);

}  // namespace cohort::plan
