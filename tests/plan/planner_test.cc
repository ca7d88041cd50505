// The planner's choices: tensor parallel on fast RDMA links, one node (or the fewest-node
// pipeline) on slow ones, uneven shares that follow node speed within memory, explicit
// layouts, an explanation naming the choice and the runners-up, and another layout where one's
// shares cannot be block-aligned.
#include <algorithm>

#include <gtest/gtest.h>

#include "plan/planner.h"
#include "plan/report.h"

namespace cohort::plan {
namespace {

PlanRequest Request(const std::string& model, const std::string& quant, ClusterSpec cluster) {
  PlanRequest r;
  r.model = *FindBuiltinShape(model);
  r.quant = *FindBuiltinQuant(quant);
  r.cluster = std::move(cluster);
  return r;
}

std::string BestLabel(const PlanRequest& r) {
  auto result = PlanLayouts(r);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  if (!result.ok() || result->best() == nullptr) return "(none)";
  return result->best()->layout.label;
}

TEST(Planner, PicksTensorParallelOnRdma) {
  for (const char* stack : {"cohort", "mlx-exo"}) {
    auto c = UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-rdma", stack);
    EXPECT_EQ(BestLabel(Request("qwen3-235b-a22b", "q8_0", *c)), "tp4") << stack;
    EXPECT_EQ(BestLabel(Request("kimi-k2", "int4-native", *c)), "tp4") << stack;
  }
}

TEST(Planner, PicksOneNodeOrFewestStagesOnSlowLinks) {
  for (const char* stack : {"cohort", "llama.cpp-rpc"}) {
    auto c = UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-tcp", stack);
    // Fits one node: splitting only adds communication.
    EXPECT_EQ(BestLabel(Request("qwen3-235b-a22b", "q8_0", *c)), "single") << stack;
    // Needs two nodes: a two-stage pipeline, since more stages add hops and no speed.
    EXPECT_EQ(BestLabel(Request("kimi-k2", "int4-native", *c)), "pp2") << stack;
  }
}

ClusterSpec StudioAndMini() {
  ClusterSpec c = *UniformCluster("mac-mini-m4-pro-64", 1, "tb5-rdma", "cohort");
  c.nodes.push_back(*FindBuiltinNode("mac-studio-m3-ultra-512"));  // listed second on purpose
  return c;
}

TEST(Planner, UnevenSharesFollowSpeed) {
  const ClusterSpec c = StudioAndMini();
  // 819 vs 273 GB/s: three quarters to the studio.
  const std::vector<double> w = SpeedWeights(c, {1, 0}, 40e9);
  EXPECT_NEAR(w[0] / (w[0] + w[1]), 0.75, 1e-6);
  PlanRequest r = Request("llama-3.1-70b", "q4_0", c);
  auto result = PlanLayouts(r);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_NE(result->best(), nullptr);
  EXPECT_EQ(result->best()->layout.label, "tp2[75/25%]");
  EXPECT_EQ(result->best()->layout.node_of_rank, (std::vector<int>{1, 0}));
  const Prediction* even = nullptr;
  for (const Prediction& p : result->candidates) {
    if (p.layout.label == "tp2") even = &p;
  }
  ASSERT_NE(even, nullptr);
  EXPECT_GT(result->best()->gen_tok_s_b1, 1.3 * even->gen_tok_s_b1);
  // The studio holds three times the mini's weights.
  EXPECT_NEAR(result->best()->ranks[0].weight_bytes / result->best()->ranks[1].weight_bytes, 3, 0.1);
}

TEST(Planner, UnevenSharesRespectMemory) {
  const ClusterSpec c = StudioAndMini();
  const double model = 228e9;  // Llama-3.1-405B at Q4_0
  const std::vector<double> w = SpeedWeights(c, {1, 0}, model);
  const double mini_cap = (c.nodes[0].usable_bytes() - c.stack.memory_overhead_bytes) / model;
  EXPECT_NEAR(w[1], mini_cap, 1e-9);  // a quarter would not fit the mini: capped
  EXPECT_NEAR(w[0], 1 - mini_cap, 1e-9);
  PlanRequest r = Request("llama-3.1-405b", "q4_0", c);
  auto result = PlanLayouts(r);
  ASSERT_TRUE(result.ok());
  ASSERT_NE(result->best(), nullptr);
  for (const RankCost& rc : result->best()->ranks) EXPECT_TRUE(rc.fits());
}

TEST(Planner, ExplicitLayoutsAndErrors) {
  PlanRequest r = Request("llama-3.1-70b", "q8_0",
                          *UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-rdma", "cohort"));
  r.layout = "tp:2,1";
  auto layouts = EnumerateLayouts(r);
  ASSERT_TRUE(layouts.ok()) << layouts.status().ToString();
  ASSERT_EQ(layouts->size(), 1u);
  EXPECT_EQ((*layouts)[0].label, "tp2[67/33%]");
  r.layout = "hybrid:2x2";
  ASSERT_TRUE(EnumerateLayouts(r).ok());
  EXPECT_EQ((*EnumerateLayouts(r))[0].spec.n_ranks(), 4);
  for (const char* bad : {"hybrid:3x3", "tp:0,1", "tp:1,1,1,1,1", "banana", "pp:"}) {
    r.layout = bad;
    EXPECT_FALSE(EnumerateLayouts(r).ok()) << bad;
  }
  r.layout = "pp";
  auto pp_only = EnumerateLayouts(r);
  ASSERT_TRUE(pp_only.ok());
  for (const Layout& l : *pp_only) EXPECT_EQ(l.label.substr(0, 2), "pp");
  PlanRequest llama = Request("llama-3.1-70b", "q8_0",
                              *UniformCluster("mac-studio-m3-ultra-512", 2, "tb5-tcp", "llama.cpp-rpc"));
  llama.layout = "tp";
  EXPECT_FALSE(EnumerateLayouts(llama).ok());  // llama.cpp's RPC backend only splits layers
}

TEST(Planner, ExplainsChoiceAndRunnersUp) {
  PlanRequest r = Request("qwen3-235b-a22b", "q8_0",
                          *UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-rdma", "cohort"));
  auto result = PlanLayouts(r);
  ASSERT_TRUE(result.ok());
  EXPECT_NE(result->explanation.find("chosen: tp4"), std::string::npos) << result->explanation;
  EXPECT_NE(result->explanation.find("runner-up"), std::string::npos) << result->explanation;
  EXPECT_GE(result->candidates.size(), 5u);
  for (size_t i = 1; i < result->candidates.size(); ++i) {
    EXPECT_GE(result->candidates[i - 1].gen_tok_s_b1 * 1.006, result->candidates[i].gen_tok_s_b1);
  }
  // Nothing fits: an explanation, not a crash.
  PlanRequest tiny = Request("llama-3.1-405b", "f16", *UniformCluster("mac-mini-m4-pro-64", 2, "10gbe", "cohort"));
  auto none = PlanLayouts(tiny);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->best(), nullptr);
  EXPECT_FALSE(none->too_big.empty());
  EXPECT_NE(none->explanation.find("no layout fits"), std::string::npos);
}

// A layout whose shares cannot fall on quant-block boundaries (here 768 FFN columns, three
// 256-wide K-quant blocks, for four tensor-parallel ranks) has no valid shard plan: the planner
// picks another layout and the report says why the one it passed over failed.
TEST(Planner, PicksAnotherLayoutWhenSharesCannotBeBlockAligned) {
  PlanRequest r = Request("llama-3.1-70b", "q4_k_m",
                          *UniformCluster("mac-studio-m3-ultra-512", 4, "tb5-rdma", "cohort"));
  EXPECT_EQ(BestLabel(r), "tp4");  // what the model as it is gets
  r.model.n_ff = 3 * 256;
  auto result = PlanLayouts(r);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_NE(result->best(), nullptr);
  EXPECT_NE(result->best()->layout.label, "tp4");
  const auto tp4 = std::find_if(result->rejected.begin(), result->rejected.end(),
                                [](const RejectedLayout& x) { return x.label == "tp4"; });
  ASSERT_NE(tp4, result->rejected.end());
  EXPECT_NE(tp4->reason.find("768 columns are 3 blocks of 256, too few for 4 ranks"), std::string::npos)
      << tp4->reason;
  const std::string text = PlanReportText(r, *result, 5, false);
  EXPECT_NE(text.find("tp4"), std::string::npos);
  EXPECT_NE(text.find("no valid shard plan: "), std::string::npos) << text;
  EXPECT_NE(text.find("too few for 4 ranks"), std::string::npos) << text;
}

}  // namespace
}  // namespace cohort::plan
