// ShardPlan construction (MakePlan, Apportion), validation, printing and JSON round trip.
#include "plan/shard_plan.h"

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <numeric>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace cohort::plan {
namespace {

using Json = nlohmann::json;

std::string Str(const Range& r) {
  if (r.empty()) return "-";
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on "[" + to_string(...).
  std::string out = "[";
  out += std::to_string(r.begin);
  out += ",";
  out += std::to_string(r.end);
  out += ")";
  return out;
}

// Splits `total` columns into block-aligned slices, one per weight (the last slice may end
// on a partial block when total is not a multiple of the block).
Result<std::vector<Range>> SplitColumns(int total, int block, const std::vector<double>& weights,
                                        const char* what) {
  std::vector<Range> out(weights.size());
  if (total == 0) return out;
  const int units = (total + block - 1) / block;
  auto counts = Apportion(units, weights, 1);
  if (!counts.ok()) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(total) + " columns are " +
                           std::to_string(units) + " blocks of " + std::to_string(block) +
                           ", too few for " + std::to_string(weights.size()) + " ranks");
  }
  int unit = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    out[i].begin = std::min(total, unit * block);
    unit += (*counts)[i];
    out[i].end = std::min(total, unit * block);
  }
  return out;
}

Result<std::vector<Range>> SplitUnits(int total, const std::vector<double>& weights,
                                      const char* what) {
  auto counts = Apportion(total, weights, 1);
  if (!counts.ok()) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(total) +
                           " cannot be shared by " + std::to_string(weights.size()) + " ranks");
  }
  std::vector<Range> out(weights.size());
  int at = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    out[i] = {at, at + (*counts)[i]};
    at += (*counts)[i];
  }
  return out;
}

// Which KV head each rank serves when ranks outnumber KV heads (see MakePlan's comment).
std::vector<int> DealRanksToKvHeads(const std::vector<double>& weights, int n_kv) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  std::vector<int> group(weights.size());
  std::vector<int> members(n_kv, 0);
  double cum = 0;
  for (size_t r = 0; r < weights.size(); ++r) {
    const double mid = cum + weights[r] / 2;
    group[r] = std::min(n_kv - 1, static_cast<int>(mid * n_kv / total));
    ++members[group[r]];
    cum += weights[r];
  }
  if (std::find(members.begin(), members.end(), 0) == members.end()) return group;
  // Some KV head got no rank: make the runs as even as possible in rank count instead.
  auto sizes = Apportion(static_cast<int>(weights.size()), std::vector<double>(n_kv, 1.0), 1);
  COHORT_CHECK(sizes.ok());
  size_t r = 0;
  for (int k = 0; k < n_kv; ++k) {
    for (int i = 0; i < (*sizes)[k]; ++i) group[r++] = k;
  }
  return group;
}

// Splits `total` heads over `weights` in whole units of `unit` heads when that is possible
// (enough units for every rank), else head by head.
Result<std::vector<Range>> SplitHeadUnits(int total, int unit, const std::vector<double>& weights,
                                          const char* what) {
  if (unit > 1 && total % unit == 0 && total / unit >= static_cast<int>(weights.size())) {
    COHORT_ASSIGN_OR_RETURN(auto units, SplitUnits(total / unit, weights, what));
    for (Range& r : units) r = {r.begin * unit, r.end * unit};
    return units;
  }
  return SplitUnits(total, weights, what);
}

// Query and KV heads of each rank of one tensor-parallel group. Splits fall on quant-block
// boundaries of attn_output where the head counts allow: with head_dim 128 and 256-wide
// K-quant blocks, heads go in pairs.
Status SplitHeads(const PlanShape& shape, const std::vector<double>& weights,
                  std::vector<RankShard>* ranks) {
  const int n_kv = shape.n_head_kv;
  const int group = shape.n_head / n_kv;  // query heads per KV head
  const int t = static_cast<int>(weights.size());
  const int align = shape.head_dim > 0 ? shape.block / std::gcd(shape.block, shape.head_dim) : 1;
  if (t <= n_kv) {
    const int kv_unit = align / std::gcd(align, group);  // KV heads whose queries fill a block
    COHORT_ASSIGN_OR_RETURN(auto kv, SplitHeadUnits(n_kv, kv_unit, weights, "KV heads"));
    for (int i = 0; i < t; ++i) {
      (*ranks)[i].kv_heads = kv[i];
      (*ranks)[i].q_heads = {kv[i].begin * group, kv[i].end * group};
    }
    return Status::Ok();
  }
  if (t > shape.n_head) {
    return InvalidArgument(std::to_string(t) + " tensor-parallel ranks but only " +
                           std::to_string(shape.n_head) + " query heads");
  }
  const std::vector<int> kv_of = DealRanksToKvHeads(weights, n_kv);
  int r = 0;
  while (r < t) {
    const int k = kv_of[r];
    int end = r;
    while (end < t && kv_of[end] == k) ++end;
    std::vector<double> sub(weights.begin() + r, weights.begin() + end);
    auto q = SplitHeadUnits(group, align, sub, "query heads of a replicated KV head");
    if (!q.ok()) {
      return InvalidArgument(std::to_string(sub.size()) + " ranks share KV head " +
                             std::to_string(k) + " which has only " + std::to_string(group) +
                             " query heads");
    }
    for (int i = r; i < end; ++i) {
      (*ranks)[i].kv_heads = {k, k + 1};
      (*ranks)[i].q_heads = {k * group + (*q)[i - r].begin, k * group + (*q)[i - r].end};
    }
    r = end;
  }
  return Status::Ok();
}

Status FillStage(const PlanShape& shape, const std::vector<double>& weights, ExpertSplit split,
                 bool first, bool last, std::vector<RankShard>* ranks) {
  const size_t t = weights.size();
  ranks->resize(t);
  for (size_t i = 0; i < t; ++i) (*ranks)[i].weight = weights[i];
  COHORT_RETURN_IF_ERROR(SplitHeads(shape, weights, ranks));
  COHORT_ASSIGN_OR_RETURN(auto ff, SplitColumns(shape.n_ff, shape.block, weights, "dense FFN"));
  COHORT_ASSIGN_OR_RETURN(auto sh,
                          SplitColumns(shape.n_ff_shexp, shape.block, weights, "shared experts"));
  std::vector<Range> experts(t), expert_cols(t);
  if (shape.n_expert > 0) {
    if (split == ExpertSplit::kWhole) {
      COHORT_ASSIGN_OR_RETURN(experts, SplitUnits(shape.n_expert, weights, "experts"));
      std::fill(expert_cols.begin(), expert_cols.end(), Range{0, shape.n_ff_expert});
    } else {
      COHORT_ASSIGN_OR_RETURN(expert_cols, SplitColumns(shape.n_ff_expert, shape.block, weights,
                                                        "expert columns"));
      std::fill(experts.begin(), experts.end(), Range{0, shape.n_expert});
    }
  }
  std::vector<Range> vocab;
  if (first || last) {
    COHORT_ASSIGN_OR_RETURN(vocab, SplitUnits(shape.n_vocab, weights, "vocabulary"));
  }
  for (size_t i = 0; i < t; ++i) {
    RankShard& s = (*ranks)[i];
    s.ff_cols = ff[i];
    s.shexp_cols = sh[i];
    s.experts = experts[i];
    s.expert_cols = expert_cols[i];
    if (first) s.embd_rows = vocab[i];
    if (last) s.output_rows = vocab[i];
  }
  return Status::Ok();
}

// `ranges` must tile [0, total) in order, each non-empty and starting on `align`.
Status CheckTiles(const std::vector<Range>& ranges, int total, int align, const std::string& what) {
  int at = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (r.begin != at || r.empty()) {
      return InvalidArgument(what + ": rank " + std::to_string(i) + " owns " + Str(r) +
                             ", expected a non-empty range starting at " + std::to_string(at));
    }
    if (align > 1 && r.begin % align != 0) {
      return InvalidArgument(what + ": rank " + std::to_string(i) + " starts at " +
                             std::to_string(r.begin) + ", not a multiple of the quant block " +
                             std::to_string(align));
    }
    at = r.end;
  }
  if (at != total) {
    return InvalidArgument(what + ": ranges end at " + std::to_string(at) + ", expected " +
                           std::to_string(total));
  }
  return Status::Ok();
}

bool AllEmpty(const std::vector<Range>& ranges) {
  return std::all_of(ranges.begin(), ranges.end(), [](const Range& r) { return r.empty(); });
}

bool AllEqual(const std::vector<Range>& ranges, Range want) {
  return std::all_of(ranges.begin(), ranges.end(), [&](const Range& r) { return r == want; });
}

Status CheckHeads(const PlanShape& shape, const StagePlan& stage, const std::string& where) {
  std::vector<Range> q;
  for (const RankShard& r : stage.ranks) q.push_back(r.q_heads);
  COHORT_RETURN_IF_ERROR(CheckTiles(q, shape.n_head, 1, where + " query heads"));
  const int group = shape.n_head / shape.n_head_kv;
  for (const RankShard& r : stage.ranks) {
    // A rank holds exactly the KV heads its query heads read.
    const Range need{r.q_heads.begin / group, (r.q_heads.end + group - 1) / group};
    if (r.kv_heads != need) {
      return InvalidArgument(where + " rank " + std::to_string(r.rank) + ": query heads " +
                             Str(r.q_heads) + " need KV heads " + Str(need) + ", it holds " +
                             Str(r.kv_heads));
    }
    if (shape.head_dim > 0 && (r.q_heads.begin * shape.head_dim) % shape.block != 0) {
      return InvalidArgument(where + " rank " + std::to_string(r.rank) +
                             ": attention output slice starts at column " +
                             std::to_string(r.q_heads.begin * shape.head_dim) +
                             ", not a multiple of the quant block " + std::to_string(shape.block));
    }
  }
  return Status::Ok();
}

Status CheckColumnsAndRows(const ShardPlan& plan, size_t s, const std::string& where) {
  const PlanShape& shape = plan.shape;
  const StagePlan& stage = plan.stages[s];
  std::vector<Range> ff, sh, ex, exc, embd, out;
  for (const RankShard& r : stage.ranks) {
    ff.push_back(r.ff_cols);
    sh.push_back(r.shexp_cols);
    ex.push_back(r.experts);
    exc.push_back(r.expert_cols);
    embd.push_back(r.embd_rows);
    out.push_back(r.output_rows);
  }
  auto tiles_or_none = [&](const std::vector<Range>& v, int total, int align, const char* what) {
    if (total == 0) {
      return AllEmpty(v) ? Status::Ok() : InvalidArgument(where + " " + what + ": model has none");
    }
    return CheckTiles(v, total, align, where + " " + what);
  };
  COHORT_RETURN_IF_ERROR(tiles_or_none(ff, shape.n_ff, shape.block, "dense FFN columns"));
  COHORT_RETURN_IF_ERROR(tiles_or_none(sh, shape.n_ff_shexp, shape.block, "shared-expert columns"));
  if (shape.n_expert == 0) {
    COHORT_RETURN_IF_ERROR(tiles_or_none(ex, 0, 1, "experts"));
    COHORT_RETURN_IF_ERROR(tiles_or_none(exc, 0, 1, "expert columns"));
  } else if (plan.expert_split == ExpertSplit::kWhole) {
    COHORT_RETURN_IF_ERROR(CheckTiles(ex, shape.n_expert, 1, where + " experts"));
    if (!AllEqual(exc, {0, shape.n_ff_expert})) {
      return InvalidArgument(where + ": whole experts must hold all expert columns");
    }
  } else {
    COHORT_RETURN_IF_ERROR(
        CheckTiles(exc, shape.n_ff_expert, shape.block, where + " expert columns"));
    if (!AllEqual(ex, {0, shape.n_expert})) {
      return InvalidArgument(where + ": expert column slices must cover every expert");
    }
  }
  const bool first = s == 0;
  const bool last = s + 1 == plan.stages.size();
  COHORT_RETURN_IF_ERROR(tiles_or_none(embd, first ? shape.n_vocab : 0, 1, "embedding rows"));
  COHORT_RETURN_IF_ERROR(tiles_or_none(out, last ? shape.n_vocab : 0, 1, "output rows"));
  return Status::Ok();
}

Json RangeJson(const Range& r) { return Json::array({r.begin, r.end}); }

// JSON readers that report a Status instead of throwing.
Status ReadInt(const Json& obj, const char* key, int* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) {
    return Corrupt(std::string("plan JSON: '") + key + "' missing or not an integer");
  }
  const auto v = it->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) return Corrupt(std::string("plan JSON: '") + key + "' out of range");
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ReadRange(const Json& obj, const char* key, Range* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number_integer() ||
      !(*it)[1].is_number_integer()) {
    return Corrupt(std::string("plan JSON: '") + key + "' must be [begin, end]");
  }
  const auto b = (*it)[0].get<int64_t>();
  const auto e = (*it)[1].get<int64_t>();
  if (b < 0 || e < b || e > INT32_MAX) return Corrupt(std::string("plan JSON: bad range '") + key + "'");
  *out = {static_cast<int>(b), static_cast<int>(e)};
  return Status::Ok();
}

Status ReadShape(const Json& j, PlanShape* m) {
  if (!j.is_object()) return Corrupt("plan JSON: 'shape' must be an object");
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_layer", &m->n_layer));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_embd", &m->n_embd));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_head", &m->n_head));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_head_kv", &m->n_head_kv));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "head_dim", &m->head_dim));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_ff", &m->n_ff));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_expert", &m->n_expert));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_ff_expert", &m->n_ff_expert));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_ff_shexp", &m->n_ff_shexp));
  COHORT_RETURN_IF_ERROR(ReadInt(j, "n_vocab", &m->n_vocab));
  return ReadInt(j, "block", &m->block);
}

Status ReadRank(const Json& j, RankShard* r) {
  if (!j.is_object()) return Corrupt("plan JSON: a rank must be an object");
  COHORT_RETURN_IF_ERROR(ReadInt(j, "rank", &r->rank));
  auto w = j.find("weight");
  if (w == j.end() || !w->is_number()) return Corrupt("plan JSON: 'weight' missing or not a number");
  r->weight = w->get<double>();
  COHORT_RETURN_IF_ERROR(ReadRange(j, "q_heads", &r->q_heads));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "kv_heads", &r->kv_heads));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "ff_cols", &r->ff_cols));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "shexp_cols", &r->shexp_cols));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "experts", &r->experts));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "expert_cols", &r->expert_cols));
  COHORT_RETURN_IF_ERROR(ReadRange(j, "embd_rows", &r->embd_rows));
  return ReadRange(j, "output_rows", &r->output_rows);
}

}  // namespace

const char* ExpertSplitName(ExpertSplit split) {
  return split == ExpertSplit::kWhole ? "whole" : "columns";
}

std::string PlanShape::ToString() const {
  std::ostringstream out;
  out << "n_layer=" << n_layer << " n_embd=" << n_embd << " n_head=" << n_head << " n_head_kv=" << n_head_kv
      << " head_dim=" << head_dim << " n_ff=" << n_ff << " n_expert=" << n_expert << " n_ff_expert=" << n_ff_expert
      << " n_ff_shexp=" << n_ff_shexp << " n_vocab=" << n_vocab << " block=" << block;
  return out.str();
}

Status PlanShape::Validate() const {
  if (n_layer <= 0 || n_embd <= 0 || n_head <= 0 || n_head_kv <= 0 || n_vocab <= 0) {
    return InvalidArgument("model shape needs positive n_layer, n_embd, n_head, n_head_kv, n_vocab");
  }
  if (n_head % n_head_kv != 0) {
    return InvalidArgument("n_head " + std::to_string(n_head) + " is not a multiple of n_head_kv " +
                           std::to_string(n_head_kv));
  }
  if (n_ff < 0 || n_expert < 0 || n_ff_expert < 0 || n_ff_shexp < 0 || head_dim < 0) {
    return InvalidArgument("model shape has a negative dimension");
  }
  if (n_ff == 0 && n_expert == 0) return InvalidArgument("model has neither a dense FFN nor experts");
  if ((n_expert > 0) != (n_ff_expert > 0)) {
    return InvalidArgument("n_expert and n_ff_expert must both be set or both be 0");
  }
  if (block <= 0) return InvalidArgument("quant block must be positive");
  return Status::Ok();
}

int LayoutSpec::n_ranks() const {
  int n = 0;
  for (const auto& stage : stage_rank_weights) n += static_cast<int>(stage.size());
  return n;
}

Status LayoutSpec::Validate() const {
  if (stage_rank_weights.empty()) return InvalidArgument("layout has no stages");
  for (size_t s = 0; s < stage_rank_weights.size(); ++s) {
    if (stage_rank_weights[s].empty()) {
      return InvalidArgument("stage " + std::to_string(s) + " has no ranks");
    }
    for (double w : stage_rank_weights[s]) {
      if (!(w > 0) || !std::isfinite(w)) {
        return InvalidArgument("stage " + std::to_string(s) + ": rank weights must be positive");
      }
    }
  }
  if (!stage_layer_weights.empty()) {
    if (stage_layer_weights.size() != stage_rank_weights.size()) {
      return InvalidArgument("stage_layer_weights has " + std::to_string(stage_layer_weights.size()) +
                             " entries for " + std::to_string(stage_rank_weights.size()) + " stages");
    }
    for (double w : stage_layer_weights) {
      if (!(w > 0) || !std::isfinite(w)) return InvalidArgument("stage layer weights must be positive");
    }
  }
  return Status::Ok();
}

LayoutSpec LayoutSpec::Tensor(int n_ranks) { return Hybrid(1, n_ranks); }
LayoutSpec LayoutSpec::Pipeline(int n_stages) { return Hybrid(n_stages, 1); }

LayoutSpec LayoutSpec::Hybrid(int n_stages, int ranks_per_stage) {
  LayoutSpec spec;
  spec.stage_rank_weights.assign(std::max(0, n_stages),
                                 std::vector<double>(std::max(0, ranks_per_stage), 1.0));
  return spec;
}

LayoutSpec LayoutSpec::TensorWeighted(std::vector<double> weights) {
  LayoutSpec spec;
  spec.stage_rank_weights.push_back(std::move(weights));
  return spec;
}

LayoutSpec LayoutSpec::PipelineWeighted(std::vector<double> layer_weights) {
  LayoutSpec spec;
  for (size_t i = 0; i < layer_weights.size(); ++i) spec.stage_rank_weights.push_back({1.0});
  spec.stage_layer_weights = std::move(layer_weights);
  return spec;
}

Result<std::vector<int>> Apportion(int total, const std::vector<double>& weights, int min_each) {
  const int n = static_cast<int>(weights.size());
  if (n == 0) return InvalidArgument("no shares to apportion");
  if (total < min_each * n) {
    return InvalidArgument(std::to_string(total) + " units cannot give " + std::to_string(n) +
                           " shares at least " + std::to_string(min_each) + " each");
  }
  double sum = 0;
  for (double w : weights) {
    if (!(w > 0) || !std::isfinite(w)) return InvalidArgument("share weights must be positive");
    sum += w;
  }
  std::vector<double> ideal(n);
  std::vector<int> count(n);
  int given = 0;
  for (int i = 0; i < n; ++i) {
    ideal[i] = total * weights[i] / sum;
    count[i] = std::max(min_each, static_cast<int>(std::floor(ideal[i])));
    given += count[i];
  }
  while (given < total) {  // the most under-served share gets the next unit; ties: lower index
    int best = 0;
    for (int i = 1; i < n; ++i) {
      if (ideal[i] - count[i] > ideal[best] - count[best]) best = i;
    }
    ++count[best];
    ++given;
  }
  while (given > total) {  // minimums overshot: take from the most over-served; ties: higher index
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (count[i] <= min_each) continue;
      if (best < 0 || ideal[i] - count[i] <= ideal[best] - count[best]) best = i;
    }
    COHORT_CHECK_GE(best, 0);
    --count[best];
    --given;
  }
  return count;
}

Result<ShardPlan> MakePlan(const PlanShape& shape, const LayoutSpec& layout) {
  COHORT_RETURN_IF_ERROR(shape.Validate().Annotate("model shape"));
  COHORT_RETURN_IF_ERROR(layout.Validate().Annotate("layout"));
  const size_t n_stages = layout.stage_rank_weights.size();
  std::vector<double> layer_weights = layout.stage_layer_weights;
  if (layer_weights.empty()) {
    for (const auto& stage : layout.stage_rank_weights) {
      layer_weights.push_back(std::accumulate(stage.begin(), stage.end(), 0.0));
    }
  }
  COHORT_ASSIGN_OR_RETURN(auto layers, SplitUnits(shape.n_layer, layer_weights, "layers"));
  ShardPlan plan;
  plan.shape = shape;
  plan.expert_split = layout.expert_split;
  plan.stages.resize(n_stages);
  int rank = 0;
  for (size_t s = 0; s < n_stages; ++s) {
    StagePlan& stage = plan.stages[s];
    stage.layers = layers[s];
    Status st = FillStage(shape, layout.stage_rank_weights[s], layout.expert_split, s == 0,
                          s + 1 == n_stages, &stage.ranks);
    COHORT_RETURN_IF_ERROR(st.Annotate("stage " + std::to_string(s)));
    for (RankShard& r : stage.ranks) r.rank = rank++;
  }
  // Catches constraints only visible once shares are known (attention slices on block bounds).
  COHORT_RETURN_IF_ERROR(plan.Validate());
  return plan;
}

int ShardPlan::n_ranks() const {
  int n = 0;
  for (const StagePlan& s : stages) n += static_cast<int>(s.ranks.size());
  return n;
}

int ShardPlan::StageOf(int rank) const {
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const RankShard& r : stages[s].ranks) {
      if (r.rank == rank) return static_cast<int>(s);
    }
  }
  COHORT_CHECK(false && "rank not in plan");
  return -1;
}

const RankShard& ShardPlan::Rank(int rank) const {
  const StagePlan& stage = stages[StageOf(rank)];
  for (const RankShard& r : stage.ranks) {
    if (r.rank == rank) return r;
  }
  COHORT_CHECK(false && "unreachable");
  return stage.ranks.front();
}

Status ShardPlan::Validate() const {
  COHORT_RETURN_IF_ERROR(shape.Validate().Annotate("model shape"));
  if (stages.empty()) return InvalidArgument("plan has no stages");
  int layer = 0;
  int rank = 0;
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::string where = "stage " + std::to_string(s);
    const StagePlan& stage = stages[s];
    if (stage.layers.begin != layer || stage.layers.empty()) {
      return InvalidArgument(where + " holds layers " + Str(stage.layers) +
                             ", expected a non-empty range starting at " + std::to_string(layer));
    }
    layer = stage.layers.end;
    if (stage.ranks.empty()) return InvalidArgument(where + " has no ranks");
    for (const RankShard& r : stage.ranks) {
      if (r.rank != rank++) {
        return InvalidArgument(where + ": rank " + std::to_string(r.rank) + " out of order, expected " +
                               std::to_string(rank - 1));
      }
      if (!(r.weight > 0) || !std::isfinite(r.weight)) {
        return InvalidArgument(where + ": rank " + std::to_string(r.rank) + " has a non-positive weight");
      }
    }
    COHORT_RETURN_IF_ERROR(CheckHeads(shape, stage, where));
    COHORT_RETURN_IF_ERROR(CheckColumnsAndRows(*this, s, where));
  }
  if (layer != shape.n_layer) {
    return InvalidArgument("stages end at layer " + std::to_string(layer) + " of " +
                           std::to_string(shape.n_layer));
  }
  return Status::Ok();
}

std::string ShardPlan::ToString() const {
  std::ostringstream out;
  const PlanShape& m = shape;
  out << "ShardPlan: " << n_ranks() << " rank(s) in " << stages.size() << " stage(s), experts by "
      << ExpertSplitName(expert_split) << "\n";
  out << "model: " << m.n_layer << " layers, " << m.n_head << " heads / " << m.n_head_kv
      << " KV, ff " << m.n_ff << ", " << m.n_expert << " experts x " << m.n_ff_expert
      << ", shared " << m.n_ff_shexp << ", vocab " << m.n_vocab << ", block " << m.block << "\n";
  for (size_t s = 0; s < stages.size(); ++s) {
    out << "stage " << s << ": layers " << Str(stages[s].layers) << "\n";
    for (const RankShard& r : stages[s].ranks) {
      out << "  rank " << r.rank << " (weight " << r.weight << "): q " << Str(r.q_heads) << " kv "
          << Str(r.kv_heads) << " ff " << Str(r.ff_cols) << " shexp " << Str(r.shexp_cols)
          << " experts " << Str(r.experts) << " x cols " << Str(r.expert_cols) << " embd "
          << Str(r.embd_rows) << " output " << Str(r.output_rows) << "\n";
    }
  }
  return out.str();
}

bool ShardPlan::operator==(const ShardPlan& other) const {
  return ToJson() == other.ToJson();
}

std::string ShardPlan::ToJson() const {
  const PlanShape& m = shape;
  Json shape_json = {{"n_layer", m.n_layer},   {"n_embd", m.n_embd},
                     {"n_head", m.n_head},     {"n_head_kv", m.n_head_kv},
                     {"head_dim", m.head_dim}, {"n_ff", m.n_ff},
                     {"n_expert", m.n_expert}, {"n_ff_expert", m.n_ff_expert},
                     {"n_ff_shexp", m.n_ff_shexp}, {"n_vocab", m.n_vocab},
                     {"block", m.block}};
  Json stages_json = Json::array();
  for (const StagePlan& s : stages) {
    Json ranks = Json::array();
    for (const RankShard& r : s.ranks) {
      ranks.push_back({{"rank", r.rank},
                       {"weight", r.weight},
                       {"q_heads", RangeJson(r.q_heads)},
                       {"kv_heads", RangeJson(r.kv_heads)},
                       {"ff_cols", RangeJson(r.ff_cols)},
                       {"shexp_cols", RangeJson(r.shexp_cols)},
                       {"experts", RangeJson(r.experts)},
                       {"expert_cols", RangeJson(r.expert_cols)},
                       {"embd_rows", RangeJson(r.embd_rows)},
                       {"output_rows", RangeJson(r.output_rows)}});
    }
    stages_json.push_back({{"layers", RangeJson(s.layers)}, {"ranks", std::move(ranks)}});
  }
  Json doc = {{"version", 1},
              {"shape", std::move(shape_json)},
              {"expert_split", ExpertSplitName(expert_split)},
              {"stages", std::move(stages_json)}};
  return doc.dump(2);
}

Result<ShardPlan> ShardPlan::FromJson(std::string_view text) {
  const Json doc = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return Corrupt("plan JSON: not a JSON object");
  int version = 0;
  COHORT_RETURN_IF_ERROR(ReadInt(doc, "version", &version));
  if (version != 1) return Unsupported("plan JSON: version " + std::to_string(version));
  ShardPlan plan;
  auto shape_it = doc.find("shape");
  if (shape_it == doc.end()) return Corrupt("plan JSON: 'shape' missing");
  COHORT_RETURN_IF_ERROR(ReadShape(*shape_it, &plan.shape));
  auto split = doc.find("expert_split");
  if (split == doc.end() || !split->is_string()) return Corrupt("plan JSON: 'expert_split' missing");
  const std::string split_name = split->get<std::string>();
  if (split_name == "whole") {
    plan.expert_split = ExpertSplit::kWhole;
  } else if (split_name == "columns") {
    plan.expert_split = ExpertSplit::kColumns;
  } else {
    return Corrupt("plan JSON: unknown expert_split '" + split_name + "'");
  }
  auto stages = doc.find("stages");
  if (stages == doc.end() || !stages->is_array()) return Corrupt("plan JSON: 'stages' must be an array");
  for (const Json& sj : *stages) {
    if (!sj.is_object()) return Corrupt("plan JSON: a stage must be an object");
    StagePlan stage;
    COHORT_RETURN_IF_ERROR(ReadRange(sj, "layers", &stage.layers));
    auto ranks = sj.find("ranks");
    if (ranks == sj.end() || !ranks->is_array()) return Corrupt("plan JSON: 'ranks' must be an array");
    for (const Json& rj : *ranks) {
      RankShard r;
      COHORT_RETURN_IF_ERROR(ReadRank(rj, &r));
      stage.ranks.push_back(r);
    }
    plan.stages.push_back(std::move(stage));
  }
  COHORT_RETURN_IF_ERROR(plan.Validate().Annotate("plan JSON"));
  return plan;
}

}  // namespace cohort::plan
