// PlanShapeOf, PlanOfModel, CheckPlanFitsModel, StageShardOf and ParseLayout; see model_plan.h.
#include "parallel/model_plan.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/dtype.h"
#include "gguf/gguf.h"

namespace cohort::parallel {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Largest quant block among the matrices whose contiguous (input) dimension is split.
int SplitBlock(const gguf::File& file) {
  int block = 1;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool split = EndsWith(t.name, "attn_output.weight") || EndsWith(t.name, "ffn_down.weight") ||
                       EndsWith(t.name, "ffn_down_exps.weight") ||
                       EndsWith(t.name, "ffn_down_shexp.weight");
    if (split) block = std::max<int>(block, static_cast<int>(Traits(t.type).block_size));
  }
  return block;
}

}  // namespace

Result<plan::PlanShape> PlanShapeOf(const gguf::File& file, const model::ModelConfig& c) {
  const bool mla = c.arch == model::Arch::kDeepseek2;
  plan::PlanShape p;
  p.n_layer = c.n_layer;
  p.n_embd = c.n_embd;
  p.n_head = c.n_head;
  // MLA computes every head from the shared latent: KV heads are as many as query heads.
  p.n_head_kv = mla ? c.n_head : c.n_head_kv;
  p.head_dim = mla ? c.mla.v_head_dim : c.head_dim_v;
  const bool moe = c.moe.n_expert > 0;
  p.n_ff = (!moe || c.moe.n_leading_dense > 0) ? c.n_ff : 0;
  p.n_expert = c.moe.n_expert;
  p.n_ff_expert = moe ? c.moe.n_ff_expert : 0;
  p.n_ff_shexp = moe ? c.moe.n_ff_expert * c.moe.n_expert_shared : 0;
  p.n_vocab = c.n_vocab;
  p.block = SplitBlock(file);
  COHORT_RETURN_IF_ERROR(p.Validate());
  return p;
}

Result<plan::ShardPlan> PlanOfModel(const gguf::File& file, const plan::LayoutSpec& spec) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(file));
  COHORT_ASSIGN_OR_RETURN(plan::PlanShape shape, PlanShapeOf(file, config));
  return plan::MakePlan(shape, spec);
}

Result<std::vector<double>> ParseShares(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const double w = std::stod(item, &used);
      if (used != item.size() || !(w > 0)) throw std::invalid_argument(item);
      out.push_back(w);
    } catch (const std::exception&) {
      return InvalidArgument("--shares: '" + item + "' is not a positive number");
    }
  }
  return out;
}

Result<plan::ShardPlan> PlanOfLayout(const gguf::File& file, const std::string& layout, int n_ranks,
                                     const std::vector<double>& weights) {
  COHORT_ASSIGN_OR_RETURN(plan::LayoutSpec spec, ParseLayout(layout, n_ranks, weights));
  return PlanOfModel(file, spec);
}

Status CheckPlanFitsModel(const plan::ShardPlan& plan, const gguf::File& file) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(file));
  COHORT_ASSIGN_OR_RETURN(plan::PlanShape shape, PlanShapeOf(file, config));
  if (!(plan.shape == shape)) {
    return InvalidArgument(fmt::format("the plan was made for another model shape ({}) than {} has ({})",
                                       plan.shape.ToString(), file.path(), shape.ToString()));
  }
  return plan.Validate();
}

Result<model::StageShard> StageShardOf(const plan::ShardPlan& plan, int rank) {
  if (rank < 0 || rank >= plan.n_ranks()) {
    return InvalidArgument(fmt::format("rank {} is not in a plan of {} ranks", rank, plan.n_ranks()));
  }
  const plan::StagePlan& stage = plan.stages[plan.StageOf(rank)];
  const plan::RankShard& r = plan.Rank(rank);
  model::StageShard s;
  s.layer_begin = stage.layers.begin;
  s.layer_end = stage.layers.end;
  s.layer.heads = {r.q_heads.begin, r.q_heads.end};
  s.layer.ffn_cols = {r.ff_cols.begin, r.ff_cols.end};
  // Whole experts (kWhole: all their columns) or a column share of every expert (kColumns).
  s.layer.experts = {r.experts.begin, r.experts.end};
  s.layer.expert_cols = {r.expert_cols.begin, r.expert_cols.end};
  s.layer.shared_cols = {r.shexp_cols.begin, r.shexp_cols.end};
  return s;
}

Result<plan::LayoutSpec> ParseLayout(const std::string& text, int n_ranks,
                               const std::vector<double>& weights) {
  if (n_ranks <= 0) return InvalidArgument("a layout needs at least one rank");
  plan::LayoutSpec spec;
  if (text == "tp") {
    spec = weights.empty() ? plan::LayoutSpec::Tensor(n_ranks) : plan::LayoutSpec::TensorWeighted(weights);
    if (!weights.empty() && static_cast<int>(weights.size()) != n_ranks) {
      return InvalidArgument(fmt::format("--shares has {} weights for {} ranks", weights.size(), n_ranks));
    }
  } else if (text == "pp") {
    spec = weights.empty() ? plan::LayoutSpec::Pipeline(n_ranks) : plan::LayoutSpec::PipelineWeighted(weights);
    if (!weights.empty() && static_cast<int>(weights.size()) != n_ranks) {
      return InvalidArgument(fmt::format("--shares has {} weights for {} stages", weights.size(), n_ranks));
    }
  } else if (text == "hybrid" || text.rfind("hybrid:", 0) == 0) {
    int stages = 2;
    if (text.size() > 7) {
      try {
        stages = std::stoi(text.substr(7));
      } catch (...) {
        return InvalidArgument("bad stage count in layout '" + text + "'");
      }
    }
    if (stages <= 0 || n_ranks % stages != 0) {
      return InvalidArgument(fmt::format("hybrid layout: {} ranks do not split into {} equal stages",
                                         n_ranks, stages));
    }
    const int per_stage = n_ranks / stages;
    spec = plan::LayoutSpec::Hybrid(stages, per_stage);
    if (!weights.empty()) {
      if (static_cast<int>(weights.size()) != n_ranks) {
        return InvalidArgument(fmt::format("--shares has {} weights for {} ranks", weights.size(), n_ranks));
      }
      for (int s = 0; s < stages; ++s) {
        for (int i = 0; i < per_stage; ++i) spec.stage_rank_weights[s][i] = weights[s * per_stage + i];
      }
    }
  } else {
    return InvalidArgument("unknown layout '" + text + "' (tp, pp, hybrid or hybrid:STAGES)");
  }
  // The CLI's layouts split routed experts whole (expert parallelism); a plan made elsewhere
  // may split them by columns, which StageShardOf runs as well.
  spec.expert_split = plan::ExpertSplit::kWhole;
  COHORT_RETURN_IF_ERROR(spec.Validate());
  return spec;
}

}  // namespace cohort::parallel
