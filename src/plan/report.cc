// Builds a PlanRequest from a PlanQuery and renders plans as text and JSON (see report.h).
// The text is formatted with printf conventions (fmt::sprintf) so that its columns read the
// same as the format strings beside them.
#include "plan/report.h"

#include <fmt/printf.h>

#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "plan/gguf_shape.h"

namespace cohort::plan {
namespace {

using Json = nlohmann::json;

constexpr double kGB = 1e9;

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot open " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool LooksLikePath(const std::string& s) {
  return s.find('/') != std::string::npos || s.find(".gguf") != std::string::npos;
}

Status LoadModel(const PlanQuery& q, PlanRequest* r) {
  if (LooksLikePath(q.model)) {
    COHORT_ASSIGN_OR_RETURN(GgufModel m, ReadGgufModel(q.model));
    r->model = m.shape;
    r->quant = m.quant;
  } else {
    COHORT_ASSIGN_OR_RETURN(r->model, FindBuiltinShape(q.model));
    COHORT_ASSIGN_OR_RETURN(r->quant, FindBuiltinQuant("q4_k_m"));
  }
  if (!q.quant.empty()) {
    COHORT_ASSIGN_OR_RETURN(r->quant, FindBuiltinQuant(q.quant));
  }
  return Status::Ok();
}

// The word ParseObjective accepts for `o`: the JSON echoes the objective as it was asked.
const char* ObjectiveKey(Objective o) {
  switch (o) {
    case Objective::kLatency: return "latency";
    case Objective::kThroughput: return "throughput";
    case Objective::kPrompt: return "prompt";
  }
  return "?";
}

std::string Header(const PlanRequest& r) {
  const ClusterSpec& c = r.cluster;
  std::string out;
  out += fmt::sprintf("model: %s, %s parameters (%s active), %s: %.3g GB, %.3g GB read per token\n",
                      r.model.name, ParamCount(r.model.TotalParams()), ParamCount(r.model.ActiveParams()),
                      r.quant.name, ModelBytes(r.model, r.quant) / kGB, ActiveBytes(r.model, r.quant) / kGB);
  out += fmt::sprintf("nodes: %s; link %s (%.0f us, %.1f Gb/s%s), %s; stack %s\n", NodeSummary(c),
                      c.link.name, c.link.latency_s * 1e6, c.link.bandwidth_Bps * 8 / 1e9,
                      c.link.rdma ? ", RDMA" : "", TopologyName(c.topology), c.stack.name);
  out += fmt::sprintf("workload: batch %d, prompt %d, context %d; objective: %s\n\n", r.workload.batch,
                      r.workload.prompt_tokens, r.workload.context_tokens, ObjectiveName(r.objective));
  return out;
}

std::string Row(int index, const Prediction& p) {
  return fmt::sprintf("%3d  %-18s %5zu %10.1f %10.1f %9.0f %8.0f %9.1f\n", index, p.layout.label,
                      p.ranks.size(), p.gen_tok_s_b1, p.gen_tok_s_batch, p.prompt_tok_s, p.ttft_s * 1e3,
                      p.max_memory_bytes() / kGB);
}

std::string MemoryPerNode(const Prediction& p) {
  std::string out = fmt::sprintf("\nmemory per node (%s):\n", p.layout.label);
  for (const RankCost& rc : p.ranks) {
    out += fmt::sprintf("  rank %d on %s: weights %.1f GB + KV %.1f GB + runtime = %.1f GB of %.1f GB usable%s\n",
                        rc.rank, rc.node_name, rc.weight_bytes / kGB, rc.kv_bytes / kGB,
                        rc.memory_bytes / kGB, rc.usable_bytes / kGB, rc.fits() ? "" : "  (DOES NOT FIT)");
  }
  return out;
}

Json PredictionJson(const Prediction& p) {
  Json memory = Json::array();
  for (const RankCost& rc : p.ranks) {
    memory.push_back({{"rank", rc.rank}, {"node", rc.node}, {"node_name", rc.node_name},
                      {"weights_gb", rc.weight_bytes / kGB}, {"kv_gb", rc.kv_bytes / kGB},
                      {"total_gb", rc.memory_bytes / kGB}, {"usable_gb", rc.usable_bytes / kGB},
                      {"fits", rc.fits()}});
  }
  const StepTime& s = p.step_b1;
  return {{"layout", p.layout.label},
          {"nodes", p.ranks.size()},
          {"gen_tok_s_batch1", p.gen_tok_s_b1},
          {"gen_tok_s_batch", p.gen_tok_s_batch},
          {"prompt_tok_s", p.prompt_tok_s},
          {"ttft_ms", p.ttft_s * 1e3},
          {"fits", p.fits},
          {"step_ms", {{"weights", s.weights_s * 1e3}, {"compute", s.compute_s * 1e3},
                       {"collectives", s.collectives_s * 1e3}, {"hops", s.hops_s * 1e3},
                       {"overhead", s.overhead_s * 1e3}}},
          {"memory_per_node", std::move(memory)}};
}

}  // namespace

Result<PlanRequest> BuildPlanRequest(const PlanQuery& q) {
  PlanRequest r;
  COHORT_RETURN_IF_ERROR(LoadModel(q, &r));
  std::string spec = q.nodes;
  if (spec.empty()) return InvalidArgument("--nodes SPEC.json is required (see docs/PLANNER.md)");
  if (spec.front() != '{') {
    COHORT_ASSIGN_OR_RETURN(spec, ReadFile(q.nodes));
  }
  COHORT_ASSIGN_OR_RETURN(r.cluster, ParseClusterSpec(spec));
  COHORT_ASSIGN_OR_RETURN(r.objective, ParseObjective(q.objective));
  r.layout = q.layout;
  r.workload.batch = q.batch;
  r.workload.prompt_tokens = q.prompt;
  r.workload.context_tokens = q.ctx;
  return r;
}

std::string NodeSummary(const ClusterSpec& c) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const NodeProfile& n : c.nodes) {
    if (counts[n.name]++ == 0) order.push_back(n.name);
  }
  std::string out;
  for (const std::string& name : order) {
    // Appended piece by piece: GCC 12 flags `(cond ? "" : ", ") + std::to_string(..)` with a
    // false -Werror=restrict under some flag sets.
    if (!out.empty()) out += ", ";
    out += std::to_string(counts[name]);
    out += " x ";
    out += name;
  }
  return out;
}

std::string ParamCount(double n) {
  return n >= 1e9 ? fmt::sprintf("%.1fB", n / 1e9) : fmt::sprintf("%.1fM", n / 1e6);
}

std::string PlanReportText(const PlanRequest& r, const PlanResult& res, int top, bool show_plan) {
  std::string out = Header(r);
  out += fmt::sprintf("  #  %-18s %5s %10s %10s %9s %8s %9s\n", "layout", "nodes", "gen tok/s",
                      "batch " + std::to_string(r.workload.batch), "prompt", "TTFT ms", "GB/node");
  int i = 0;
  for (const Prediction& p : res.candidates) {
    if (i >= top) break;
    out += Row(++i, p);
  }
  if (res.candidates.size() > static_cast<size_t>(top)) {
    out += fmt::sprintf("     ... %zu more\n", res.candidates.size() - top);
  }
  for (const Prediction& p : res.too_big) {
    out += fmt::sprintf("  -  %-18s does not fit: needs %.1f GB on one node\n", p.layout.label,
                        p.max_memory_bytes() / kGB);
  }
  for (const RejectedLayout& x : res.rejected) {
    out += fmt::sprintf("  -  %-18s no valid shard plan: %s\n", x.label, x.reason);
  }
  // Appended piece by piece, as in NodeSummary: GCC 12 flags `"\n" + string` with a false
  // -Werror=restrict.
  out += '\n';
  out += res.explanation;
  if (res.best() != nullptr) {
    out += MemoryPerNode(*res.best());
    if (show_plan) {
      out += '\n';
      out += res.best()->plan.ToString();
    }
  }
  return out;
}

Json PlanReportJson(const PlanRequest& r, const PlanResult& res, bool show_plan) {
  Json doc;
  doc["model"] = {{"name", r.model.name}, {"quant", r.quant.name},
                  {"params_b", r.model.TotalParams() / 1e9}, {"active_params_b", r.model.ActiveParams() / 1e9},
                  {"weights_gb", ModelBytes(r.model, r.quant) / kGB}};
  doc["cluster"] = {{"nodes", NodeSummary(r.cluster)}, {"link", r.cluster.link.name},
                    {"topology", TopologyName(r.cluster.topology)}, {"stack", r.cluster.stack.name}};
  doc["workload"] = {{"batch", r.workload.batch}, {"prompt", r.workload.prompt_tokens},
                     {"context", r.workload.context_tokens}, {"objective", ObjectiveKey(r.objective)}};
  doc["candidates"] = Json::array();
  for (const Prediction& p : res.candidates) doc["candidates"].push_back(PredictionJson(p));
  doc["too_big"] = Json::array();
  for (const Prediction& p : res.too_big) doc["too_big"].push_back(PredictionJson(p));
  doc["rejected"] = Json::array();
  for (const auto& x : res.rejected) doc["rejected"].push_back({{"layout", x.label}, {"reason", x.reason}});
  doc["best"] = res.best() ? Json(res.best()->layout.label) : Json(nullptr);
  doc["explanation"] = res.explanation;
  if (res.best() != nullptr && show_plan) doc["plan"] = Json::parse(res.best()->plan.ToJson());
  return doc;
}

std::string BuiltinProfilesText() {
  std::string out = "model shapes:\n";
  for (const auto& m : BuiltinShapes()) {
    out += fmt::sprintf("  %-18s %7.1fB params, %6.1fB active\n", m.name, m.TotalParams() / 1e9,
                        m.ActiveParams() / 1e9);
  }
  out += "quantizations:\n";
  for (const auto& q : BuiltinQuants()) out += fmt::sprintf("  %-18s %s\n", q.name, q.note);
  out += "nodes:\n";
  for (const auto& n : BuiltinNodes()) {
    out += fmt::sprintf("  %-24s %5.0f GB, %5.0f GB/s, %5.1f TFLOP/s  (%s)\n", n.name,
                        n.memory_bytes / (1024.0 * 1024 * 1024), n.memory_bandwidth_Bps / 1e9, n.flops / 1e12,
                        n.source);
  }
  out += "links:\n";
  for (const auto& l : BuiltinLinks()) {
    out += fmt::sprintf("  %-10s %6.0f us, %5.1f Gb/s%s  (%s)\n", l.name, l.latency_s * 1e6,
                        l.bandwidth_Bps * 8 / 1e9, l.rdma ? ", RDMA" : "", l.source);
  }
  out += "stacks:\n";
  for (const auto& s : BuiltinStacks()) out += fmt::sprintf("  %-14s %s\n", s.name, s.source);
  return out;
}

}  // namespace cohort::plan
