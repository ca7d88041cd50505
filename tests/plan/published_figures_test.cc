// Acceptance 1 of issue 7: the ten published generation figures for four Mac Studio M3 Ultra
// over Thunderbolt 5 (llama.cpp layer split over TCP; exo tensor parallel over RDMA), each
// reproduced within +-20% from the built-in profiles, with the right direction for every
// change. One node profile and one link profile per transport; one stack profile per
// software stack, shared by all of its rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "plan/cost_model.h"

namespace cohort::plan {
namespace {

struct Row {
  const char* model;
  const char* quant;  // the likely quantization of the run (docs/PLANNER.md)
  bool exo;           // exo tensor parallel over RDMA; else llama.cpp layer split over TCP
  int nodes;
  double published;   // generation tokens/s
};

constexpr Row kRows[] = {
    {"qwen3-235b-a22b", "q8_0", false, 1, 20.4},
    {"qwen3-235b-a22b", "q8_0", false, 2, 17.2},
    {"qwen3-235b-a22b", "q8_0", false, 4, 15.2},
    {"kimi-k2", "q4_0-experts-q8_0", false, 2, 18.5},
    {"kimi-k2", "q4_0-experts-q8_0", false, 4, 16.4},
    {"qwen3-235b-a22b", "mlx-8bit", true, 1, 19.5},
    {"qwen3-235b-a22b", "mlx-8bit", true, 2, 26.2},
    {"qwen3-235b-a22b", "mlx-8bit", true, 4, 31.9},
    {"kimi-k2", "int4-native", true, 2, 21.6},
    {"kimi-k2", "int4-native", true, 4, 28.3},
};

Prediction PredictRow(const Row& row) {
  auto model = FindBuiltinShape(row.model);
  auto quant = FindBuiltinQuant(row.quant);
  auto cluster = UniformCluster("mac-studio-m3-ultra-512", row.nodes,
                                row.exo ? "tb5-rdma" : "tb5-tcp",
                                row.exo ? "mlx-exo" : "llama.cpp-rpc");
  EXPECT_TRUE(model.ok() && quant.ok() && cluster.ok());
  const Layout layout{std::string(row.exo ? "tp" : "pp") + std::to_string(row.nodes),
                      row.exo ? LayoutSpec::Tensor(row.nodes)
                              : LayoutSpec::Pipeline(row.nodes),
                      {}};
  Workload workload;
  workload.context_tokens = 256;  // short benchmark prompts
  auto p = Predict(*model, *quant, *cluster, layout, workload);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Prediction{};
}

TEST(PublishedFigures, AllTenWithinTwentyPercent) {
  std::printf("%-16s %-18s %-5s %5s %9s %9s %7s   %s\n", "model", "quant", "stack", "nodes",
              "published", "predicted", "error", "weights / collectives / hops / overhead (ms)");
  for (const Row& row : kRows) {
    const Prediction p = PredictRow(row);
    const double error = p.gen_tok_s_b1 / row.published - 1;
    const StepTime& t = p.step_b1;
    std::printf("%-16s %-18s %-5s %5d %9.1f %9.1f %+6.1f%%   %.1f / %.1f / %.1f / %.1f\n", row.model,
                row.quant, row.exo ? "exo" : "llama", row.nodes, row.published, p.gen_tok_s_b1,
                100 * error, 1e3 * (t.weights_s + t.compute_s), 1e3 * t.collectives_s, 1e3 * t.hops_s,
                1e3 * t.overhead_s);
    EXPECT_TRUE(p.fits) << row.model << " on " << row.nodes << " node(s)";
    EXPECT_LT(std::fabs(error), 0.20) << row.model << " " << row.nodes << " nodes, "
                                      << (row.exo ? "exo" : "llama.cpp");
  }
}

TEST(PublishedFigures, EveryChangeGoesTheRightWay) {
  double predicted[10];
  for (int i = 0; i < 10; ++i) predicted[i] = PredictRow(kRows[i]).gen_tok_s_b1;
  // Consecutive rows of one model and stack: the published direction must be predicted.
  for (int i = 1; i < 10; ++i) {
    if (std::string(kRows[i].model) != kRows[i - 1].model || kRows[i].exo != kRows[i - 1].exo) continue;
    const bool published_up = kRows[i].published > kRows[i - 1].published;
    EXPECT_EQ(predicted[i] > predicted[i - 1], published_up) << "row " << i;
    // Layer split over TCP falls with nodes; tensor parallel over RDMA rises.
    EXPECT_EQ(published_up, kRows[i].exo);
  }
}

TEST(PublishedFigures, QuantizationsMatchSizesAndMemory) {
  auto qwen = *FindBuiltinShape("qwen3-235b-a22b");
  auto kimi = *FindBuiltinShape("kimi-k2");
  // Qwen3-235B at 8 bits is ~250 GB: fits one 512 GB node.
  EXPECT_NEAR(ModelBytes(qwen, *FindBuiltinQuant("q8_0")) / 1e9, 250, 5);
  // Kimi K2 Thinking as released is ~594 GB: needs two nodes (the published runs start at 2).
  EXPECT_NEAR(ModelBytes(kimi, *FindBuiltinQuant("int4-native")) / 1e9, 594, 6);
  for (const Row& row : kRows) EXPECT_TRUE(PredictRow(row).fits);
  Row kimi_one = kRows[8];
  kimi_one.nodes = 1;
  EXPECT_FALSE(PredictRow(kimi_one).fits);
  Row kimi_gguf_one = kRows[3];
  kimi_gguf_one.nodes = 1;
  EXPECT_FALSE(PredictRow(kimi_gguf_one).fits);
}

TEST(PublishedFigures, ProfilesArePhysical) {
  // The spec-sheet bandwidth and the Thunderbolt 5 line rate, not fitted values.
  EXPECT_EQ(FindBuiltinNode("mac-studio-m3-ultra-512")->memory_bandwidth_Bps, 819e9);
  EXPECT_EQ(FindBuiltinLink("tb5-rdma")->bandwidth_Bps, 80e9 / 8);
  EXPECT_GT(FindBuiltinLink("tb5-tcp")->latency_s, 10 * FindBuiltinLink("tb5-rdma")->latency_s);
  // Stack efficiencies are fractions a runtime reaches, below the physical limit.
  for (const StackProfile& s : BuiltinStacks()) {
    EXPECT_LE(s.bandwidth_efficiency, 0.85) << s.name;
    EXPECT_GE(s.bandwidth_efficiency, 0.5) << s.name;
  }
}

}  // namespace
}  // namespace cohort::plan
