// The planner's report: builds a PlanRequest from what a user names (a built-in shape or a
// GGUF path, a node spec file or inline JSON, a layout and an objective), and renders a
// PlanRequest with its PlanResult as the text table or the JSON document that `cohort plan`
// prints. Everything here returns strings or JSON; printing is the caller's business.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "plan/hardware.h"
#include "plan/planner.h"

namespace cohort::plan {

// A planning question as typed, before any file is read. The defaults are `cohort plan`'s.
struct PlanQuery {
  std::string model;                  // built-in shape name, or a GGUF path (has '/' or ".gguf")
  std::string quant;                  // built-in scheme; "" = as stored (GGUF) or q4_k_m (shape)
  std::string nodes;                  // node spec: a JSON file, or inline JSON starting with '{'
  std::string layout = "auto";        // auto|single|tp|pp|hybrid|tp:W,..|pp:W,..|hybrid:SxT
  std::string objective = "latency";  // latency|throughput|prompt
  int batch = 8;                      // sequences for the batch-N figure
  int prompt = 512;                   // prompt tokens for prompt tok/s and TTFT
  int ctx = 4096;                     // context tokens per sequence (KV cache)
};

// Loads the model shape (a GGUF header, or a built-in shape with q4_k_m unless `quant` says
// otherwise) and the node spec, and parses the objective. The error messages name the
// command-line flags, as the query mirrors them one to one.
Result<PlanRequest> BuildPlanRequest(const PlanQuery& query);

// "2 x mac-mini-m4-pro-64, 1 x studio": the nodes by name, counted, in spec order.
std::string NodeSummary(const ClusterSpec& cluster);

// "235.1B", "1.4M": parameter counts from tiny test models to trillion-parameter ones.
std::string ParamCount(double n);

// The header (model, nodes, workload), the first `top` candidates as table rows, the layouts
// that do not fit or have no valid plan, the explanation, the best layout's memory per node
// and, with `show_plan`, its ShardPlan.
std::string PlanReportText(const PlanRequest& request, const PlanResult& result, int top,
                           bool show_plan);

// One document: model, cluster, workload, candidates, too_big, rejected, best, explanation and,
// with `show_plan` and a best layout, its ShardPlan (docs/PLANNER.md lists the fields).
nlohmann::json PlanReportJson(const PlanRequest& request, const PlanResult& result, bool show_plan);

// The built-in model shapes, quantizations and node, link and stack profiles, one per line.
std::string BuiltinProfilesText();

}  // namespace cohort::plan
