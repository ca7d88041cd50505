// `cohort plan`: predicts tokens/s and memory per node for the layouts a cluster allows, for
// a built-in model shape or a GGUF file, and explains which layout it would choose.
#pragma once

#include "plan/report.h"

namespace CLI {
class App;
}

namespace cohort::app {

struct PlanOptions {
  plan::PlanQuery query;         // model, quant, nodes, layout, objective, batch, prompt, ctx
  int top = 12;                  // candidate rows printed
  bool json = false;
  bool show_plan = false;        // print the chosen ShardPlan
  bool list = false;             // list built-in shapes, quants and profiles
};

// Registers the `plan` subcommand on `app`, filling `options`; returns it so main can test
// whether it was chosen.
CLI::App* AddPlanCommand(CLI::App& app, PlanOptions* options);

// Runs it; returns the process exit code.
int PlanCommand(const PlanOptions& options);

}  // namespace cohort::app
