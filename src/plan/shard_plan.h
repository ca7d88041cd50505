// ShardPlan: which rank of one model instance holds which layers, heads, FFN columns, experts
// and vocabulary rows. Pure data (no model code): it is made from a few model dimensions and a
// layout, checked by Validate(), printed, and round-tripped through JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cohort::plan {

// The model dimensions a plan needs. Independent of model::ModelConfig on purpose, so the
// planner can reason about models that are not on this machine.
struct PlanShape {
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;       // query heads
  int n_head_kv = 0;    // KV heads (MLA: use n_head, every head is computed from the latent)
  int head_dim = 0;     // columns of attn_output per query head; 0 = do not check alignment
  int n_ff = 0;         // dense FFN width (0: every layer is MoE)
  int n_expert = 0;     // routed experts (0: dense model)
  int n_ff_expert = 0;  // width of one routed expert
  int n_ff_shexp = 0;   // total width of the shared experts (0: none)
  int n_vocab = 0;
  // Column slices of matrices whose contiguous dimension is split (ffn_down, attn_output)
  // must start on a quant block: 32 for Q4_0/Q8_0, 256 for the K-quants.
  int block = 32;

  Status Validate() const;
  std::string ToString() const;  // "n_layer=.. n_embd=.. ..": every field, for error messages
  bool operator==(const PlanShape&) const = default;
};

enum class ExpertSplit {
  kWhole,    // expert parallelism: each rank owns whole experts
  kColumns,  // every expert's columns are sliced like a dense FFN
};

const char* ExpertSplitName(ExpertSplit split);

// The layout to build a plan for: pipeline stages, and inside each the relative weight of
// each tensor-parallel rank (its share of heads, columns, experts and vocabulary rows).
struct LayoutSpec {
  std::vector<std::vector<double>> stage_rank_weights;  // [stage][rank in stage]
  // Relative layer count per stage; empty: the sum of the stage's rank weights.
  std::vector<double> stage_layer_weights;
  ExpertSplit expert_split = ExpertSplit::kColumns;

  static LayoutSpec Tensor(int n_ranks);
  static LayoutSpec Pipeline(int n_stages);
  static LayoutSpec Hybrid(int n_stages, int ranks_per_stage);
  static LayoutSpec TensorWeighted(std::vector<double> weights);
  static LayoutSpec PipelineWeighted(std::vector<double> layer_weights);

  int n_ranks() const;
  Status Validate() const;
};

// A half-open range [begin, end) of heads, columns, experts, layers or rows.
struct Range {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool empty() const { return end <= begin; }
  bool operator==(const Range&) const = default;
};

// One rank's share inside its stage. Ranges that do not apply are empty.
struct RankShard {
  int rank = 0;          // global rank: stage 0's ranks first, then stage 1's, ...
  double weight = 1.0;   // the relative weight it was given
  Range q_heads;         // query heads
  Range kv_heads;        // KV heads it holds (shared with other ranks when replicated)
  Range ff_cols;         // dense FFN columns (layers without experts)
  Range shexp_cols;      // shared-expert columns
  Range experts;         // whole routed experts (ExpertSplit::kWhole)
  Range expert_cols;     // columns of every routed expert (ExpertSplit::kColumns)
  Range embd_rows;       // token-embedding rows (first stage only)
  Range output_rows;     // output-matrix rows = logits it computes (last stage only)
  bool operator==(const RankShard&) const = default;
};

struct StagePlan {
  Range layers;
  std::vector<RankShard> ranks;
  bool operator==(const StagePlan&) const = default;
};

struct ShardPlan {
  PlanShape shape;
  ExpertSplit expert_split = ExpertSplit::kColumns;
  std::vector<StagePlan> stages;

  int n_ranks() const;
  int n_stages() const { return static_cast<int>(stages.size()); }
  // The stage and position inside it of a global rank; COHORT_CHECKs the rank exists.
  const RankShard& Rank(int rank) const;
  int StageOf(int rank) const;

  // Every layer in exactly one stage, every query head, FFN column, expert and vocabulary row
  // owned exactly once per stage, every KV head held by at least one rank (exactly one unless
  // replicated), query heads inside their KV heads, column slices on quant-block boundaries.
  Status Validate() const;
  std::string ToString() const;
  std::string ToJson() const;  // pretty-printed, versioned
  static Result<ShardPlan> FromJson(std::string_view text);

  bool operator==(const ShardPlan& other) const;
};

// Builds the plan for `layout` on a model of `shape`. Shares follow the weights by the
// largest-remainder rule (ties go to the lower rank), every rank gets at least one unit of
// every split dimension, and column slices are whole quant blocks. KV replication: when a
// stage has more ranks than KV heads, its ranks are dealt in contiguous runs to the KV heads
// (a rank joins the KV head its weight interval's midpoint falls in; if that leaves a KV head
// without ranks, the runs are made as even as possible in rank count instead); each rank of a
// run holds that KV head and a weighted share of its query heads.
Result<ShardPlan> MakePlan(const PlanShape& shape, const LayoutSpec& layout);

// Splits `total` units over `weights` (all > 0) by the largest-remainder rule with at least
// `min_each` per share. Fails when total < min_each * weights.size().
Result<std::vector<int>> Apportion(int total, const std::vector<double>& weights, int min_each);

}  // namespace cohort::plan
