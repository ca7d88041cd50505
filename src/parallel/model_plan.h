// Bridges a loaded model and the ShardPlan: the plan's model dimensions read from a GGUF's
// config and tensor types, and the model-layer shard (heads, columns, experts, layers) that a
// plan rank computes.
#pragma once

#include "core/status.h"
#include "model/config.h"
#include "model/decoder.h"
#include "plan/shard_plan.h"

namespace cohort::gguf {
class File;
}

namespace cohort::parallel {

// The plan shape of `config`; the quant block is the largest block of the matrices whose
// columns a plan splits (attn_output, ffn_down, the experts' down projections), 1 for F32.
Result<plan::PlanShape> PlanShapeOf(const gguf::File& file, const model::ModelConfig& config);

// The plan for `spec` on `file`'s model (PlanShapeOf, then plan::MakePlan).
Result<plan::ShardPlan> PlanOfModel(const gguf::File& file, const plan::LayoutSpec& spec);

// The CLI's --shares: "2,1,1", positive numbers (kInvalidArgument naming the bad item).
Result<std::vector<double>> ParseShares(const std::string& text);

// PlanOfModel for a layout in ParseLayout's syntax over `n_ranks` ranks.
Result<plan::ShardPlan> PlanOfLayout(const gguf::File& file, const std::string& layout, int n_ranks,
                                     const std::vector<double>& weights = {});

// Ok when `plan` was made for `file`'s model (the same PlanShape) and is valid: a plan that
// travelled from a planner elsewhere is run only if it describes this very model.
Status CheckPlanFitsModel(const plan::ShardPlan& plan, const gguf::File& file);

// The layers and per-layer slice that plan rank `rank` computes, routed experts split whole
// or by columns as the plan says.
Result<model::StageShard> StageShardOf(const plan::ShardPlan& plan, int rank);

// Parses a layout name as the CLI takes it: "tp", "pp", "hybrid" (2 stages) or "hybrid:S",
// for n_ranks ranks with optional per-rank weights (empty: even). Weights apply to tp (one per
// rank), pp (one per stage: its share of layers) and hybrid (one per rank, stage by stage).
Result<plan::LayoutSpec> ParseLayout(const std::string& text, int n_ranks,
                               const std::vector<double>& weights);

}  // namespace cohort::parallel
