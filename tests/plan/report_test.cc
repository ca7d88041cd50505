// The plan report: a PlanRequest built from a query as `cohort plan` takes it, and the text
// and JSON renderings with the fields docs/PLANNER.md promises.
#include "plan/report.h"

#include <gtest/gtest.h>

namespace cohort::plan {
namespace {

std::string Example(const std::string& name) { return std::string(COHORT_SOURCE_DIR) + "/examples/plan/" + name; }

PlanQuery Query(const std::string& model, const std::string& nodes) {
  PlanQuery q;
  q.model = model;
  q.nodes = nodes;
  return q;
}

TEST(PlanReport, BuildsTheRequestFromAShapeAndANodeSpecFile) {
  PlanQuery q = Query("llama-3.1-70b", Example("mac-studio-x4-rdma.json"));
  q.objective = "throughput";
  q.batch = 4;
  q.prompt = 100;
  q.ctx = 1000;
  auto r = BuildPlanRequest(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.name, "llama-3.1-70b");
  EXPECT_EQ(r->quant.name, "q4_k_m");  // a shape's default
  EXPECT_EQ(r->cluster.nodes.size(), 4u);
  EXPECT_EQ(r->objective, Objective::kThroughput);
  EXPECT_EQ(r->workload.batch, 4);
  EXPECT_EQ(r->workload.prompt_tokens, 100);
  EXPECT_EQ(r->workload.context_tokens, 1000);

  q.quant = "q8_0";
  q.nodes = R"({"nodes": [{"profile": "mac-mini-m4-pro-64"}]})";  // inline JSON
  r = BuildPlanRequest(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->quant.name, "q8_0");
  EXPECT_EQ(r->cluster.nodes.size(), 1u);
}

TEST(PlanReport, RejectsWhatItCannotLoad) {
  EXPECT_FALSE(BuildPlanRequest(Query("no-such-shape", Example("mixed-measured.json"))).ok());
  EXPECT_FALSE(BuildPlanRequest(Query("llama-3.1-70b", "")).ok());
  EXPECT_FALSE(BuildPlanRequest(Query("llama-3.1-70b", "/nonexistent/spec.json")).ok());
  EXPECT_FALSE(BuildPlanRequest(Query("/nonexistent/model.gguf", Example("mixed-measured.json"))).ok());
  PlanQuery q = Query("llama-3.1-70b", Example("mixed-measured.json"));
  q.objective = "fastest";
  EXPECT_FALSE(BuildPlanRequest(q).ok());
}

TEST(PlanReport, SummarisesNodesInSpecOrder) {
  ClusterSpec c;
  for (const char* name : {"mini", "studio", "mini"}) {
    NodeProfile n;
    n.name = name;
    c.nodes.push_back(n);
  }
  EXPECT_EQ(NodeSummary(c), "2 x mini, 1 x studio");
  EXPECT_EQ(ParamCount(235.14e9), "235.1B");
  EXPECT_EQ(ParamCount(1.44e6), "1.4M");
}

TEST(PlanReport, JsonHasTheDocumentedFields) {
  PlanQuery q = Query("llama-3.1-70b", Example("mac-studio-x4-rdma.json"));
  q.objective = "prompt";
  auto r = BuildPlanRequest(q);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto res = PlanLayouts(*r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_NE(res->best(), nullptr);

  const nlohmann::json doc = PlanReportJson(*r, *res, false);
  for (const char* key : {"model", "cluster", "workload", "candidates", "too_big", "rejected", "best", "explanation"}) {
    EXPECT_TRUE(doc.contains(key)) << key;
  }
  EXPECT_FALSE(doc.contains("plan"));
  EXPECT_EQ(doc["model"]["name"], "llama-3.1-70b");
  EXPECT_EQ(doc["cluster"]["nodes"], NodeSummary(r->cluster));
  EXPECT_EQ(doc["workload"]["objective"], "prompt");  // as asked, not ObjectiveName's prose
  EXPECT_EQ(doc["best"], res->best()->layout.label);
  EXPECT_EQ(doc["explanation"], res->explanation);
  ASSERT_EQ(doc["candidates"].size(), res->candidates.size());
  const nlohmann::json& first = doc["candidates"][0];
  for (const char* key : {"layout", "nodes", "gen_tok_s_batch1", "gen_tok_s_batch", "prompt_tok_s", "ttft_ms",
                          "fits", "step_ms", "memory_per_node"}) {
    EXPECT_TRUE(first.contains(key)) << key;
  }
  EXPECT_EQ(first["nodes"], res->best()->ranks.size());
  EXPECT_DOUBLE_EQ(first["ttft_ms"].get<double>(), res->best()->ttft_s * 1e3);
  EXPECT_EQ(first["memory_per_node"].size(), res->best()->ranks.size());
  for (const char* key : {"weights", "compute", "collectives", "hops", "overhead"}) {
    EXPECT_TRUE(first["step_ms"].contains(key)) << key;
  }

  const nlohmann::json with_plan = PlanReportJson(*r, *res, true);
  ASSERT_TRUE(with_plan.contains("plan"));
  EXPECT_EQ(with_plan["plan"], nlohmann::json::parse(res->best()->plan.ToJson()));
}

TEST(PlanReport, TextShowsTheTopRowsAndTheBestLayoutsMemory) {
  auto r = BuildPlanRequest(Query("llama-3.1-70b", Example("mac-studio-x4-rdma.json")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto res = PlanLayouts(*r);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_GT(res->candidates.size(), 1u);

  const std::string text = PlanReportText(*r, *res, 1, false);
  EXPECT_EQ(text.rfind("model: llama-3.1-70b, ", 0), 0u) << text;
  EXPECT_NE(text.find("\nnodes: " + NodeSummary(r->cluster) + "; link "), std::string::npos) << text;
  EXPECT_NE(text.find("  1  " + res->best()->layout.label), std::string::npos) << text;
  EXPECT_EQ(text.find("\n  2  "), std::string::npos) << text;
  EXPECT_NE(text.find("     ... " + std::to_string(res->candidates.size() - 1) + " more\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find(res->explanation), std::string::npos);
  EXPECT_NE(text.find("\nmemory per node (" + res->best()->layout.label + "):\n"), std::string::npos) << text;
  EXPECT_EQ(text.find(res->best()->plan.ToString()), std::string::npos);
  EXPECT_NE(PlanReportText(*r, *res, 1, true).find(res->best()->plan.ToString()), std::string::npos);
}

TEST(PlanReport, ListsEveryBuiltinProfile) {
  const std::string text = BuiltinProfilesText();
  for (const auto& m : BuiltinShapes()) EXPECT_NE(text.find("  " + m.name + " "), std::string::npos) << m.name;
  for (const auto& q : BuiltinQuants()) EXPECT_NE(text.find("  " + q.name + " "), std::string::npos) << q.name;
  for (const auto& n : BuiltinNodes()) EXPECT_NE(text.find("  " + n.name + " "), std::string::npos) << n.name;
  for (const auto& l : BuiltinLinks()) EXPECT_NE(text.find("  " + l.name + " "), std::string::npos) << l.name;
  for (const auto& s : BuiltinStacks()) EXPECT_NE(text.find("  " + s.name + " "), std::string::npos) << s.name;
  EXPECT_EQ(text.rfind("model shapes:\n", 0), 0u);
}

}  // namespace
}  // namespace cohort::plan
