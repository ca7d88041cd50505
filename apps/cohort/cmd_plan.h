// `cohort plan`: predicts tokens/s and memory per node for the layouts a cluster allows, for
// a built-in model shape or a GGUF file, and explains which layout it would choose.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cohort::app {

struct PlanOptions {
  std::string model;             // built-in shape name or GGUF path
  std::string quant;             // built-in scheme; "" = as stored (GGUF) or q4_k_m (shape)
  std::string nodes;             // node spec: JSON file, or inline JSON starting with '{'
  std::string layout = "auto";   // auto|single|tp|pp|hybrid|tp:W,..|pp:W,..|hybrid:SxT
  std::string objective = "latency";  // latency|throughput|prompt
  int batch = 8;
  int prompt = 512;
  int ctx = 4096;
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
