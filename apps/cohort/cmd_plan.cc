// `cohort plan`: loads the model shape (built-in or GGUF) and the node spec, runs the planner
// and prints the candidate layouts as a table or one JSON document.
#include "cmd_plan.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "plan/gguf_shape.h"
#include "plan/planner.h"

namespace cohort::app {
namespace {

using plan::Prediction;
using Json = nlohmann::json;

constexpr double kGB = 1e9;

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort plan: %s\n", status.ToString().c_str());
  return 1;
}

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

Status LoadModel(const PlanOptions& o, plan::PlanRequest* r) {
  if (LooksLikePath(o.model)) {
    COHORT_ASSIGN_OR_RETURN(plan::GgufModel m, plan::ReadGgufModel(o.model));
    r->model = m.shape;
    r->quant = m.quant;
  } else {
    COHORT_ASSIGN_OR_RETURN(r->model, plan::FindBuiltinShape(o.model));
    COHORT_ASSIGN_OR_RETURN(r->quant, plan::FindBuiltinQuant("q4_k_m"));
  }
  if (!o.quant.empty()) {
    COHORT_ASSIGN_OR_RETURN(r->quant, plan::FindBuiltinQuant(o.quant));
  }
  return Status::Ok();
}

Result<plan::PlanRequest> BuildRequest(const PlanOptions& o) {
  plan::PlanRequest r;
  COHORT_RETURN_IF_ERROR(LoadModel(o, &r));
  std::string spec = o.nodes;
  if (spec.empty()) return InvalidArgument("--nodes SPEC.json is required (see docs/PLANNER.md)");
  if (spec.front() != '{') {
    COHORT_ASSIGN_OR_RETURN(spec, ReadFile(o.nodes));
  }
  COHORT_ASSIGN_OR_RETURN(r.cluster, plan::ParseClusterSpec(spec));
  COHORT_ASSIGN_OR_RETURN(r.objective, plan::ParseObjective(o.objective));
  r.layout = o.layout;
  r.workload.batch = o.batch;
  r.workload.prompt_tokens = o.prompt;
  r.workload.context_tokens = o.ctx;
  return r;
}

std::string NodeSummary(const plan::ClusterSpec& c) {
  std::map<std::string, int> counts;
  std::vector<std::string> order;
  for (const plan::NodeProfile& n : c.nodes) {
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

// "235.1B", "1.4M": parameter counts from tiny test models to trillion-parameter ones.
std::string Count(double n) {
  char buf[32];
  if (n >= 1e9) {
    std::snprintf(buf, sizeof(buf), "%.1fB", n / 1e9);
  } else {
    std::snprintf(buf, sizeof(buf), "%.1fM", n / 1e6);
  }
  return buf;
}

void PrintHeader(const plan::PlanRequest& r) {
  const plan::ClusterSpec& c = r.cluster;
  std::printf("model: %s, %s parameters (%s active), %s: %.3g GB, %.3g GB read per token\n",
              r.model.name.c_str(), Count(r.model.TotalParams()).c_str(),
              Count(r.model.ActiveParams()).c_str(), r.quant.name.c_str(),
              plan::ModelBytes(r.model, r.quant) / kGB, plan::ActiveBytes(r.model, r.quant) / kGB);
  std::printf("nodes: %s; link %s (%.0f us, %.1f Gb/s%s), %s; stack %s\n", NodeSummary(c).c_str(),
              c.link.name.c_str(), c.link.latency_s * 1e6, c.link.bandwidth_Bps * 8 / 1e9,
              c.link.rdma ? ", RDMA" : "", plan::TopologyName(c.topology), c.stack.name.c_str());
  std::printf("workload: batch %d, prompt %d, context %d; objective: %s\n\n", r.workload.batch,
              r.workload.prompt_tokens, r.workload.context_tokens, plan::ObjectiveName(r.objective));
}

void PrintRow(int index, const plan::Prediction& p) {
  std::printf("%3d  %-18s %5zu %10.1f %10.1f %9.0f %8.0f %9.1f\n", index, p.layout.label.c_str(),
              p.ranks.size(), p.gen_tok_s_b1, p.gen_tok_s_batch, p.prompt_tok_s, p.ttft_s * 1e3,
              p.max_memory_bytes() / kGB);
}

void PrintMemory(const plan::Prediction& p) {
  std::printf("\nmemory per node (%s):\n", p.layout.label.c_str());
  for (const plan::RankCost& rc : p.ranks) {
    std::printf("  rank %d on %s: weights %.1f GB + KV %.1f GB + runtime = %.1f GB of %.1f GB usable%s\n",
                rc.rank, rc.node_name.c_str(), rc.weight_bytes / kGB, rc.kv_bytes / kGB,
                rc.memory_bytes / kGB, rc.usable_bytes / kGB, rc.fits() ? "" : "  (DOES NOT FIT)");
  }
}

void PrintText(const PlanOptions& o, const plan::PlanRequest& r, const plan::PlanResult& res) {
  PrintHeader(r);
  std::printf("  #  %-18s %5s %10s %10s %9s %8s %9s\n", "layout", "nodes", "gen tok/s",
              ("batch " + std::to_string(r.workload.batch)).c_str(), "prompt", "TTFT ms", "GB/node");
  int i = 0;
  for (const plan::Prediction& p : res.candidates) {
    if (i >= o.top) break;
    PrintRow(++i, p);
  }
  if (res.candidates.size() > static_cast<size_t>(o.top)) {
    std::printf("     ... %zu more\n", res.candidates.size() - o.top);
  }
  for (const plan::Prediction& p : res.too_big) {
    std::printf("  -  %-18s does not fit: needs %.1f GB on one node\n", p.layout.label.c_str(),
                p.max_memory_bytes() / kGB);
  }
  for (const plan::RejectedLayout& x : res.rejected) {
    std::printf("  -  %-18s no valid shard plan: %s\n", x.label.c_str(), x.reason.c_str());
  }
  std::printf("\n%s", res.explanation.c_str());
  if (res.best() != nullptr) {
    PrintMemory(*res.best());
    if (o.show_plan) std::printf("\n%s", res.best()->plan.ToString().c_str());
  }
}

Json PredictionJson(const plan::Prediction& p) {
  Json memory = Json::array();
  for (const plan::RankCost& rc : p.ranks) {
    memory.push_back({{"rank", rc.rank}, {"node", rc.node}, {"node_name", rc.node_name},
                      {"weights_gb", rc.weight_bytes / kGB}, {"kv_gb", rc.kv_bytes / kGB},
                      {"total_gb", rc.memory_bytes / kGB}, {"usable_gb", rc.usable_bytes / kGB},
                      {"fits", rc.fits()}});
  }
  const plan::StepTime& s = p.step_b1;
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

void PrintJson(const PlanOptions& o, const plan::PlanRequest& r, const plan::PlanResult& res) {
  Json doc;
  doc["model"] = {{"name", r.model.name}, {"quant", r.quant.name},
                  {"params_b", r.model.TotalParams() / 1e9}, {"active_params_b", r.model.ActiveParams() / 1e9},
                  {"weights_gb", plan::ModelBytes(r.model, r.quant) / kGB}};
  doc["cluster"] = {{"nodes", NodeSummary(r.cluster)}, {"link", r.cluster.link.name},
                    {"topology", plan::TopologyName(r.cluster.topology)}, {"stack", r.cluster.stack.name}};
  doc["workload"] = {{"batch", r.workload.batch}, {"prompt", r.workload.prompt_tokens},
                     {"context", r.workload.context_tokens}, {"objective", o.objective}};
  doc["candidates"] = Json::array();
  for (const plan::Prediction& p : res.candidates) doc["candidates"].push_back(PredictionJson(p));
  doc["too_big"] = Json::array();
  for (const plan::Prediction& p : res.too_big) doc["too_big"].push_back(PredictionJson(p));
  doc["rejected"] = Json::array();
  for (const auto& x : res.rejected) doc["rejected"].push_back({{"layout", x.label}, {"reason", x.reason}});
  doc["best"] = res.best() ? Json(res.best()->layout.label) : Json(nullptr);
  doc["explanation"] = res.explanation;
  if (res.best() != nullptr && o.show_plan) doc["plan"] = Json::parse(res.best()->plan.ToJson());
  std::printf("%s\n", doc.dump(2).c_str());
}

void PrintBuiltins() {
  std::printf("model shapes:\n");
  for (const auto& m : plan::BuiltinShapes()) {
    std::printf("  %-18s %7.1fB params, %6.1fB active\n", m.name.c_str(), m.TotalParams() / 1e9,
                m.ActiveParams() / 1e9);
  }
  std::printf("quantizations:\n");
  for (const auto& q : plan::BuiltinQuants()) std::printf("  %-18s %s\n", q.name.c_str(), q.note.c_str());
  std::printf("nodes:\n");
  for (const auto& n : plan::BuiltinNodes()) {
    std::printf("  %-24s %5.0f GB, %5.0f GB/s, %5.1f TFLOP/s  (%s)\n", n.name.c_str(),
                n.memory_bytes / (1024.0 * 1024 * 1024), n.memory_bandwidth_Bps / 1e9, n.flops / 1e12,
                n.source.c_str());
  }
  std::printf("links:\n");
  for (const auto& l : plan::BuiltinLinks()) {
    std::printf("  %-10s %6.0f us, %5.1f Gb/s%s  (%s)\n", l.name.c_str(), l.latency_s * 1e6,
                l.bandwidth_Bps * 8 / 1e9, l.rdma ? ", RDMA" : "", l.source.c_str());
  }
  std::printf("stacks:\n");
  for (const auto& s : plan::BuiltinStacks()) std::printf("  %-14s %s\n", s.name.c_str(), s.source.c_str());
}

}  // namespace

CLI::App* AddPlanCommand(CLI::App& app, PlanOptions* o) {
  CLI::App* cmd = app.add_subcommand("plan", "predict tokens/s and memory per node for each layout a cluster allows");
  cmd->add_option("--model", o->model, "built-in shape (see --list) or GGUF file");
  cmd->add_option("--nodes", o->nodes, "node spec JSON file (docs/PLANNER.md), or inline JSON");
  cmd->add_option("--quant", o->quant, "quantization (default: as stored in the GGUF, q4_k_m for shapes)");
  cmd->add_option("--layout", o->layout, "auto, single, tp, pp, hybrid, tp:W1,W2.., pp:W1,W2.., hybrid:SxT");
  cmd->add_option("--objective", o->objective, "latency (batch 1), throughput (batch N) or prompt")
      ->check(CLI::IsMember({"latency", "throughput", "prompt"}));
  cmd->add_option("--batch", o->batch, "sequences for the batch-N figure")->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt", o->prompt, "prompt tokens for prompt tok/s and TTFT")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-c,--ctx", o->ctx, "context tokens per sequence (KV cache)")->check(CLI::Range(0, 1 << 22));
  cmd->add_option("--top", o->top, "candidate rows to print")->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", o->json, "print one JSON document");
  cmd->add_flag("--show-plan", o->show_plan, "print the chosen ShardPlan");
  cmd->add_flag("--list", o->list, "list built-in model shapes, quantizations and profiles");
  return cmd;
}

int PlanCommand(const PlanOptions& options) {
  if (options.list) {
    PrintBuiltins();
    return 0;
  }
  if (options.model.empty()) return Fail(InvalidArgument("--model MODEL|SHAPE is required"));
  auto request = BuildRequest(options);
  if (!request.ok()) return Fail(request.status());
  auto result = plan::PlanLayouts(*request);
  if (!result.ok()) return Fail(result.status());
  if (options.json) {
    PrintJson(options, *request, *result);
  } else {
    PrintText(options, *request, *result);
  }
  return result->best() != nullptr ? 0 : 3;
}

}  // namespace cohort::app
