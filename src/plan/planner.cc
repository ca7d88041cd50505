// Layout enumeration, speed- and memory-following shares, ranking and the explanation.
#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

namespace cohort::plan {
namespace {

std::string Fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

std::string WeightsLabel(const std::vector<double>& w) {
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  std::string out = "[";
  for (size_t i = 0; i < w.size(); ++i) {
    if (i) out += "/";
    out += std::to_string(static_cast<int>(std::lround(100 * w[i] / sum)));
  }
  return out + "%]";
}

// Nodes ordered fastest first (memory bandwidth, then memory), stable on ties.
std::vector<int> NodesBySpeed(const ClusterSpec& c) {
  std::vector<int> order(c.nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (c.nodes[a].memory_bandwidth_Bps != c.nodes[b].memory_bandwidth_Bps) {
      return c.nodes[a].memory_bandwidth_Bps > c.nodes[b].memory_bandwidth_Bps;
    }
    return c.nodes[a].memory_bytes > c.nodes[b].memory_bytes;
  });
  return order;
}

// `order` with the first node that may run rank 0 moved to its front (nothing moves when
// any node may, or when none of `order` may: Predict's caller then sees rank 0 unchanged).
std::vector<int> FirstRankFront(const PlanRequest& req, std::vector<int> order) {
  const std::vector<int>& allowed = req.first_rank_nodes;
  if (allowed.empty()) return order;
  auto it = std::find_if(order.begin(), order.end(),
                         [&](int n) { return std::find(allowed.begin(), allowed.end(), n) != allowed.end(); });
  if (it != order.end()) std::rotate(order.begin(), it, it + 1);
  return order;
}

bool Uniform(const ClusterSpec& c, const std::vector<int>& nodes) {
  for (int n : nodes) {
    if (c.nodes[n].memory_bandwidth_Bps != c.nodes[nodes[0]].memory_bandwidth_Bps ||
        c.nodes[n].memory_bytes != c.nodes[nodes[0]].memory_bytes) {
      return false;
    }
  }
  return true;
}

Layout Make(std::string label, plan::LayoutSpec spec, std::vector<int> nodes) {
  return Layout{std::move(label), std::move(spec), std::move(nodes)};
}

void AddLayoutsFor(const PlanRequest& req, const std::vector<int>& nodes, const std::string& kind,
                   std::vector<Layout>* out) {
  const ClusterSpec& c = req.cluster;
  const int k = static_cast<int>(nodes.size());
  const std::string n = std::to_string(k);
  if (k == 1) {
    if (kind == "auto" || kind == "single") out->push_back(Make("single", plan::LayoutSpec::Tensor(1), nodes));
    return;
  }
  const bool uniform = Uniform(c, nodes);
  const std::vector<double> w = SpeedWeights(c, nodes, ModelBytes(req.model, req.quant));
  if (c.stack.supports_tensor_parallel && (kind == "auto" || kind == "tp")) {
    out->push_back(Make("tp" + n, plan::LayoutSpec::Tensor(k), nodes));
    if (!uniform) out->push_back(Make("tp" + n + WeightsLabel(w), plan::LayoutSpec::TensorWeighted(w), nodes));
    if (req.model.is_moe()) {
      plan::LayoutSpec ep = plan::LayoutSpec::Tensor(k);
      ep.expert_split = plan::ExpertSplit::kWhole;
      out->push_back(Make("tp" + n + "-ep", ep, nodes));
    }
  }
  if (c.stack.supports_pipeline && (kind == "auto" || kind == "pp")) {
    out->push_back(Make("pp" + n, plan::LayoutSpec::Pipeline(k), nodes));
    if (!uniform) out->push_back(Make("pp" + n + WeightsLabel(w), plan::LayoutSpec::PipelineWeighted(w), nodes));
  }
  if (c.stack.supports_tensor_parallel && c.stack.supports_pipeline && (kind == "auto" || kind == "hybrid")) {
    for (int s = 2; s < k; ++s) {
      if (k % s != 0) continue;
      out->push_back(Make("hybrid" + std::to_string(s) + "x" + std::to_string(k / s),
                          plan::LayoutSpec::Hybrid(s, k / s), nodes));
    }
  }
}

Result<std::vector<double>> ParseWeights(const std::string& text) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || *end != '\0' || !(v > 0) || !std::isfinite(v)) {
      return InvalidArgument("layout weights must be positive numbers, got '" + item + "'");
    }
    out.push_back(v);
  }
  if (out.empty()) return InvalidArgument("layout weights missing");
  return out;
}

// "tp:2,1,1", "pp:3,1", "hybrid:2x2".
Result<Layout> ExplicitLayout(const PlanRequest& req, const std::string& kind, const std::string& arg) {
  const std::vector<int> order = FirstRankFront(req, NodesBySpeed(req.cluster));
  if (kind == "hybrid") {
    int s = 0, t = 0;
    char x = 0;
    std::stringstream in(arg);
    if (!(in >> s >> x >> t) || x != 'x' || s < 1 || t < 1) {
      return InvalidArgument("hybrid layout is hybrid:STAGESxRANKS, e.g. hybrid:2x2");
    }
    if (s * t > static_cast<int>(order.size())) return InvalidArgument("hybrid:" + arg + " needs more nodes than the spec has");
    return Make("hybrid" + arg, plan::LayoutSpec::Hybrid(s, t),
                std::vector<int>(order.begin(), order.begin() + s * t));
  }
  COHORT_ASSIGN_OR_RETURN(std::vector<double> w, ParseWeights(arg));
  if (w.size() > order.size()) return InvalidArgument(kind + ":" + arg + " names more ranks than nodes");
  // Weights apply to the nodes in the order the spec lists them (a node that may run rank 0
  // first, when the request names such nodes).
  std::vector<int> listed(req.cluster.nodes.size());
  std::iota(listed.begin(), listed.end(), 0);
  listed = FirstRankFront(req, std::move(listed));
  std::vector<int> nodes(listed.begin(), listed.begin() + static_cast<std::ptrdiff_t>(w.size()));
  if (kind == "tp") return Make("tp" + std::to_string(w.size()) + WeightsLabel(w), plan::LayoutSpec::TensorWeighted(w), nodes);
  if (kind == "pp") return Make("pp" + std::to_string(w.size()) + WeightsLabel(w), plan::LayoutSpec::PipelineWeighted(w), nodes);
  return InvalidArgument("unknown layout '" + kind + ":" + arg + "' (tp:W,.. pp:W,.. hybrid:SxT)");
}

std::string StepText(const StepTime& s) {
  return Fmt("weights %.1f ms, compute %.1f ms, ", s.weights_s * 1e3, s.compute_s * 1e3) +
         Fmt("collectives %.1f ms, hops %.1f ms, overhead %.1f ms", s.collectives_s * 1e3,
             s.hops_s * 1e3, s.overhead_s * 1e3);
}

// The term of `worse` that grew most against `best`, in words.
std::string LargestLoss(const StepTime& best, const StepTime& worse) {
  const double d[5] = {worse.weights_s - best.weights_s, worse.compute_s - best.compute_s,
                       worse.collectives_s - best.collectives_s, worse.hops_s - best.hops_s,
                       worse.overhead_s - best.overhead_s};
  const char* names[5] = {"more weight bytes per node per token", "compute",
                          "collective latency", "pipeline hops", "software overhead"};
  int k = static_cast<int>(std::max_element(d, d + 5) - d);
  if (d[k] <= 0) return "no single term; totals are close";
  return Fmt("+%.1f ms of ", d[k] * 1e3) + names[k];
}

std::string Explain(const PlanRequest& req, const PlanResult& r) {
  std::ostringstream out;
  const Prediction* best = r.best();
  if (best == nullptr) {
    out << "no layout fits: the model needs " << Fmt("%.1f GB", ModelBytes(req.model, req.quant) / 1e9)
        << " of weights; add nodes or pick a smaller quantization";
    return out.str();
  }
  const Objective o = req.objective;
  out << "chosen: " << best->layout.label << " on " << best->ranks.size() << " node(s), "
      << Fmt("%.1f", ObjectiveValue(*best, o)) << " (" << ObjectiveName(o) << ")\n";
  out << "  per token at batch 1: " << StepText(best->step_b1) << "\n";
  bool single_fits = false;
  for (const Prediction& p : r.candidates) single_fits |= p.layout.label == "single";
  if (!single_fits && best->ranks.size() > 1) {
    out << "  one node cannot hold it: " << Fmt("%.1f GB", ModelBytes(req.model, req.quant) / 1e9)
        << " of weights\n";
  }
  if (best->layout.spec.stage_rank_weights.size() > 1) {
    out << "  pipeline stages run one after another for a single sequence: they add memory, "
           "not speed, at batch 1\n";
  }
  int shown = 0;
  for (size_t i = 1; i < r.candidates.size() && shown < 4; ++i, ++shown) {
    const Prediction& p = r.candidates[i];
    out << "  runner-up " << p.layout.label << ": " << Fmt("%.1f", ObjectiveValue(p, o)) << " ("
        << Fmt("%+.0f%%", 100 * (ObjectiveValue(p, o) / ObjectiveValue(*best, o) - 1)) << "), "
        << LargestLoss(best->step_b1, p.step_b1) << "\n";
  }
  if (!r.too_big.empty()) out << "  " << r.too_big.size() << " layout(s) do not fit in memory\n";
  if (!r.rejected.empty()) out << "  " << r.rejected.size() << " layout(s) have no valid shard plan\n";
  return out.str();
}

}  // namespace

const char* ObjectiveName(Objective o) {
  switch (o) {
    case Objective::kLatency: return "generation tok/s, batch 1";
    case Objective::kThroughput: return "generation tok/s, batch N";
    case Objective::kPrompt: return "prompt tok/s";
  }
  return "?";
}

Result<Objective> ParseObjective(const std::string& name) {
  if (name == "latency") return Objective::kLatency;
  if (name == "throughput") return Objective::kThroughput;
  if (name == "prompt") return Objective::kPrompt;
  return InvalidArgument("unknown objective '" + name + "' (latency, throughput, prompt)");
}

double ObjectiveValue(const Prediction& p, Objective o) {
  switch (o) {
    case Objective::kLatency: return p.gen_tok_s_b1;
    case Objective::kThroughput: return p.gen_tok_s_batch;
    case Objective::kPrompt: return p.prompt_tok_s;
  }
  return 0;
}

std::vector<double> SpeedWeights(const ClusterSpec& c, const std::vector<int>& nodes,
                                 double model_bytes) {
  const size_t k = nodes.size();
  std::vector<double> w(k, 0), cap(k);
  std::vector<bool> fixed(k, false);
  for (size_t i = 0; i < k; ++i) {
    const NodeProfile& n = c.nodes[nodes[i]];
    cap[i] = std::max(1e-3, (n.usable_bytes() - c.stack.memory_overhead_bytes) / model_bytes);
  }
  double remaining = 1.0;
  for (size_t round = 0; round < k; ++round) {  // water-filling: at most k nodes hit their cap
    double speed = 0;
    for (size_t i = 0; i < k; ++i) {
      if (!fixed[i]) speed += c.nodes[nodes[i]].memory_bandwidth_Bps;
    }
    bool capped = false;
    for (size_t i = 0; i < k; ++i) {
      if (fixed[i]) continue;
      w[i] = remaining * c.nodes[nodes[i]].memory_bandwidth_Bps / speed;
      if (w[i] > cap[i]) {
        w[i] = cap[i];
        fixed[i] = true;
        remaining -= cap[i];
        capped = true;
      }
    }
    if (!capped || remaining <= 0) break;
  }
  for (double& x : w) x = std::max(x, 1e-3);
  return w;
}

Result<std::vector<Layout>> EnumerateLayouts(const PlanRequest& req) {
  std::string kind = req.layout;
  const size_t colon = kind.find(':');
  if (colon != std::string::npos) {
    COHORT_ASSIGN_OR_RETURN(Layout l, ExplicitLayout(req, kind.substr(0, colon), kind.substr(colon + 1)));
    return std::vector<Layout>{l};
  }
  if (kind != "auto" && kind != "single" && kind != "tp" && kind != "pp" && kind != "hybrid") {
    return InvalidArgument("unknown layout '" + kind + "' (auto, single, tp, pp, hybrid, tp:W,.., pp:W,.., hybrid:SxT)");
  }
  const std::vector<int> order = FirstRankFront(req, NodesBySpeed(req.cluster));
  std::vector<Layout> out;
  // Bounded search: beyond 64 nodes per instance the per-layer collectives of any layout here
  // dominate, and enumerating every prefix would cost O(nodes^3).
  constexpr size_t kMaxNodesPerInstance = 64;
  for (size_t k = 1; k <= std::min(order.size(), kMaxNodesPerInstance); ++k) {
    AddLayoutsFor(req, std::vector<int>(order.begin(), order.begin() + k), kind, &out);
  }
  if (out.empty()) return InvalidArgument("layout '" + kind + "' is not possible on this cluster and stack");
  return out;
}

Status CheckLayout(const std::string& layout, int node_count) {
  PlanRequest req;
  req.layout = layout;
  // Alike nodes: only the layout's spelling and its node count are checked, not its fit.
  NodeProfile node;
  node.memory_bytes = 1e12;
  node.memory_bandwidth_Bps = 1e11;
  req.cluster.nodes.assign(static_cast<size_t>(std::max(node_count, 1)), node);
  return EnumerateLayouts(req).status();
}

Result<PlanResult> PlanLayouts(const PlanRequest& req) {
  COHORT_RETURN_IF_ERROR(req.model.Validate());
  COHORT_RETURN_IF_ERROR(req.cluster.Validate());
  COHORT_RETURN_IF_ERROR(req.workload.Validate());
  for (int n : req.first_rank_nodes) {
    if (n < 0 || n >= static_cast<int>(req.cluster.nodes.size())) {
      return InvalidArgument("first_rank_nodes: node " + std::to_string(n) + " is not in the cluster spec");
    }
  }
  COHORT_ASSIGN_OR_RETURN(std::vector<Layout> layouts, EnumerateLayouts(req));
  PlanResult result;
  for (const Layout& layout : layouts) {
    auto p = Predict(req.model, req.quant, req.cluster, layout, req.workload);
    if (!p.ok()) {
      result.rejected.push_back({layout.label, p.status().message()});
    } else if (!p->fits) {
      result.too_big.push_back(std::move(*p));
    } else {
      result.candidates.push_back(std::move(*p));
    }
  }
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [&](const Prediction& a, const Prediction& b) {
                     return ObjectiveValue(a, req.objective) > ObjectiveValue(b, req.objective);
                   });
  // Within 0.5% of the best, fewer nodes win: the others stay free for other work.
  if (!result.candidates.empty()) {
    const double top = ObjectiveValue(result.candidates.front(), req.objective);
    size_t pick = 0;
    for (size_t i = 1; i < result.candidates.size(); ++i) {
      if (ObjectiveValue(result.candidates[i], req.objective) < 0.995 * top) break;
      if (result.candidates[i].ranks.size() < result.candidates[pick].ranks.size()) pick = i;
    }
    std::rotate(result.candidates.begin(), result.candidates.begin() + pick,
                result.candidates.begin() + pick + 1);
  }
  result.explanation = Explain(req, result);
  return result;
}

}  // namespace cohort::plan
