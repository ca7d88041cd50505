// The ten published generation figures for four Mac Studio M3 Ultra over Thunderbolt 5
// (llama.cpp layer split over TCP; exo tensor parallel over RDMA). Four of them are the
// calibration rows that the two stack profiles were fitted to (src/plan/hardware.cc): the one-
// and two-node Qwen3-235B runs of each stack. The other six are predictions, and only they are
// checked against the published figures. One node profile and one link profile per transport;
// one stack profile per software stack, shared by all of its rows.
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
  bool calibration;   // the stack's constants were fitted to this row
};

constexpr Row kRows[] = {
    {"qwen3-235b-a22b", "q8_0", false, 1, 20.4, true},
    {"qwen3-235b-a22b", "q8_0", false, 2, 17.2, true},
    {"qwen3-235b-a22b", "q8_0", false, 4, 15.2, false},
    {"kimi-k2", "q4_0-experts-q8_0", false, 2, 18.5, false},
    {"kimi-k2", "q4_0-experts-q8_0", false, 4, 16.4, false},
    {"qwen3-235b-a22b", "mlx-8bit", true, 1, 19.5, true},
    {"qwen3-235b-a22b", "mlx-8bit", true, 2, 26.2, true},
    {"qwen3-235b-a22b", "mlx-8bit", true, 4, 31.9, false},
    {"kimi-k2", "int4-native", true, 2, 21.6, false},
    {"kimi-k2", "int4-native", true, 4, 28.3, false},
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

// The six rows no constant was fitted to. Errors on this build: llama.cpp Qwen3 4 nodes -0.7%,
// Kimi K2 2 nodes -3.5%, 4 nodes -3.2%; exo Qwen3 4 nodes -4.0%, Kimi K2 2 nodes -1.6%,
// 4 nodes -0.8%. The tolerance is 5%, just above the worst of them. They are not blind
// predictions in the strict sense: the stated constants (per-token overheads, exo's message
// cost) were first chosen with all ten rows in view, so this bounds how well the model
// extrapolates to more nodes and to another model, not how it would do on an unseen stack.
TEST(PublishedFigures, HeldOutRowsWithinFivePercent) {
  std::printf("%-16s %-18s %-5s %5s %9s %9s %7s   %s\n", "model", "quant", "stack", "nodes",
              "published", "predicted", "error", "weights / collectives / hops / overhead (ms)");
  int held_out = 0;
  for (const Row& row : kRows) {
    const Prediction p = PredictRow(row);
    const double error = p.gen_tok_s_b1 / row.published - 1;
    const StepTime& t = p.step_b1;
    std::printf("%-16s %-18s %-5s %5d %9.1f %9.1f %+6.1f%%   %.1f / %.1f / %.1f / %.1f%s\n", row.model,
                row.quant, row.exo ? "exo" : "llama", row.nodes, row.published, p.gen_tok_s_b1,
                100 * error, 1e3 * (t.weights_s + t.compute_s), 1e3 * t.collectives_s, 1e3 * t.hops_s,
                1e3 * t.overhead_s, row.calibration ? "   (calibration)" : "");
    EXPECT_TRUE(p.fits) << row.model << " on " << row.nodes << " node(s)";
    if (row.calibration) continue;
    ++held_out;
    EXPECT_LT(std::fabs(error), 0.05) << row.model << " " << row.nodes << " nodes, "
                                      << (row.exo ? "exo" : "llama.cpp");
  }
  EXPECT_EQ(held_out, 6);
}

// The fitted constants in hardware.cc are the solution for the calibration rows, kept to 3
// significant figures (0.1% of a figure at most); a constant changed without refitting fails.
TEST(PublishedFigures, StackConstantsAreTheFitToTheCalibrationRows) {
  for (const Row& row : kRows) {
    if (!row.calibration) continue;
    const double error = PredictRow(row).gen_tok_s_b1 / row.published - 1;
    EXPECT_LT(std::fabs(error), 0.002) << row.model << " " << row.nodes << " nodes, "
                                       << (row.exo ? "exo" : "llama.cpp");
  }
}

TEST(PublishedFigures, EveryChangeGoesTheRightWay) {
  double predicted[10];
  for (int i = 0; i < 10; ++i) predicted[i] = PredictRow(kRows[i]).gen_tok_s_b1;
  // Consecutive rows of one model and stack where at least one is a prediction: the published
  // direction (layer split over TCP falls with nodes, tensor parallel over RDMA rises) must be
  // predicted.
  int checked = 0;
  for (int i = 1; i < 10; ++i) {
    if (std::string(kRows[i].model) != kRows[i - 1].model || kRows[i].exo != kRows[i - 1].exo) continue;
    if (kRows[i].calibration && kRows[i - 1].calibration) continue;
    const bool published_up = kRows[i].published > kRows[i - 1].published;
    EXPECT_EQ(predicted[i] > predicted[i - 1], published_up) << "row " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
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
