// `cohort plan`: parses the options, asks the planner (plan/report.h builds the request and
// renders the answer) and prints the candidate layouts as a table or one JSON document.
#include "cmd_plan.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "plan/planner.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort plan: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

CLI::App* AddPlanCommand(CLI::App& app, PlanOptions* o) {
  plan::PlanQuery* q = &o->query;
  CLI::App* cmd = app.add_subcommand("plan", "predict tokens/s and memory per node for each layout a cluster allows");
  cmd->add_option("--model", q->model, "built-in shape (see --list) or GGUF file");
  cmd->add_option("--nodes", q->nodes, "node spec JSON file (docs/PLANNER.md), or inline JSON");
  cmd->add_option("--quant", q->quant, "quantization (default: as stored in the GGUF, q4_k_m for shapes)");
  cmd->add_option("--layout", q->layout, "auto, single, tp, pp, hybrid, tp:W1,W2.., pp:W1,W2.., hybrid:SxT");
  cmd->add_option("--objective", q->objective, "latency (batch 1), throughput (batch N) or prompt")
      ->check(CLI::IsMember({"latency", "throughput", "prompt"}));
  cmd->add_option("--batch", q->batch, "sequences for the batch-N figure")->check(CLI::Range(1, 4096));
  cmd->add_option("--prompt", q->prompt, "prompt tokens for prompt tok/s and TTFT")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-c,--ctx", q->ctx, "context tokens per sequence (KV cache)")->check(CLI::Range(0, 1 << 22));
  cmd->add_option("--top", o->top, "candidate rows to print")->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", o->json, "print one JSON document");
  cmd->add_flag("--show-plan", o->show_plan, "print the chosen ShardPlan");
  cmd->add_flag("--list", o->list, "list built-in model shapes, quantizations and profiles");
  return cmd;
}

int PlanCommand(const PlanOptions& options) {
  if (options.list) {
    std::fputs(plan::BuiltinProfilesText().c_str(), stdout);
    return 0;
  }
  if (options.query.model.empty()) return Fail(InvalidArgument("--model MODEL|SHAPE is required"));
  auto request = plan::BuildPlanRequest(options.query);
  if (!request.ok()) return Fail(request.status());
  auto result = plan::PlanLayouts(*request);
  if (!result.ok()) return Fail(result.status());
  if (options.json) {
    std::printf("%s\n", plan::PlanReportJson(*request, *result, options.show_plan).dump(2).c_str());
  } else {
    std::fputs(plan::PlanReportText(*request, *result, options.top, options.show_plan).c_str(), stdout);
  }
  return result->best() != nullptr ? 0 : 3;
}

}  // namespace cohort::app
