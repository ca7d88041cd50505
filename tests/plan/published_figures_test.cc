// The ten published generation figures for four Mac Studio M3 Ultra over Thunderbolt 5
// (llama.cpp layer split over TCP; exo tensor parallel over RDMA). Each stack has two fitted
// constants (its weight-streaming efficiency and its per-hop or per-collective cost; its
// per-token overhead is an estimate, not fitted). They are fitted on the three Qwen3-235B
// rows of that stack ALONE — the calibration rows, on which this test repeats the fit and
// requires the built-in constants to be its result — and the four Kimi K2 rows (another
// model, 1T parameters with MLA, other quantizations) are predictions, held out of the fit.
// Measured when the fit was made: calibration within 2.0%, predictions within 3.0%.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "plan/cost_model.h"

namespace cohort::plan {
namespace {

struct Row {
  const char* model;
  const char* quant;  // the likely quantization of the run (docs/PLANNER.md)
  bool exo;           // exo tensor parallel over RDMA; else llama.cpp layer split over TCP
  int nodes;
  double published;   // generation tokens/s
  bool calibration() const { return std::string(model) == "qwen3-235b-a22b"; }
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

// The row's prediction with the built-in stack, or with `stack` instead.
Prediction PredictRow(const Row& row, const StackProfile* stack = nullptr) {
  auto model = FindBuiltinShape(row.model);
  auto quant = FindBuiltinQuant(row.quant);
  auto cluster = UniformCluster("mac-studio-m3-ultra-512", row.nodes,
                                row.exo ? "tb5-rdma" : "tb5-tcp",
                                row.exo ? "mlx-exo" : "llama.cpp-rpc");
  EXPECT_TRUE(model.ok() && quant.ok() && cluster.ok());
  if (stack != nullptr) cluster->stack = *stack;
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

const char* StackOf(const Row& row) { return row.exo ? "mlx-exo" : "llama.cpp-rpc"; }

// The stack's fitted constant besides the efficiency: exo's cost per collective, llama.cpp's
// cost per remote layer.
double& SecondConstant(StackProfile& s, bool exo) { return exo ? s.collective_overhead_s : s.remote_layer_overhead_s; }

// The two constants that make the worst relative error over `exo`'s calibration rows least,
// on a grid of 0.01 in efficiency and 2.5 us (exo) or 10 us (llama.cpp) in the other.
StackProfile FitOnCalibrationRows(bool exo) {
  const StackProfile base = *FindBuiltinStack(exo ? "mlx-exo" : "llama.cpp-rpc");
  StackProfile best_stack = base;
  double best = 1e9;
  const double step = exo ? 2.5e-6 : 10e-6;
  for (int e = 50; e <= 85; ++e) {
    for (int k = 0; k * step <= (exo ? 60e-6 : 300e-6) + 1e-12; ++k) {
      StackProfile s = base;
      s.bandwidth_efficiency = e / 100.0;
      SecondConstant(s, exo) = k * step;
      double worst = 0;
      for (const Row& row : kRows) {
        if (row.exo != exo || !row.calibration()) continue;
        worst = std::max(worst, std::fabs(PredictRow(row, &s).gen_tok_s_b1 / row.published - 1));
      }
      if (worst < best - 1e-12) {
        best = worst;
        best_stack = s;
      }
    }
  }
  return best_stack;
}

TEST(PublishedFigures, BuiltInConstantsAreTheFitOnTheCalibrationRowsAlone) {
  for (bool exo : {false, true}) {
    StackProfile built_in = *FindBuiltinStack(exo ? "mlx-exo" : "llama.cpp-rpc");
    StackProfile fit = FitOnCalibrationRows(exo);
    EXPECT_NEAR(built_in.bandwidth_efficiency, fit.bandwidth_efficiency, 1e-9) << built_in.name;
    EXPECT_NEAR(SecondConstant(built_in, exo), SecondConstant(fit, exo), 1e-12) << built_in.name;
  }
}

TEST(PublishedFigures, CalibrationFitsAndHeldOutRowsArePredicted) {
  std::printf("%-16s %-18s %-5s %5s %-11s %9s %9s %7s   %s\n", "model", "quant", "stack", "nodes", "role",
              "published", "predicted", "error", "weights / collectives / hops / overhead (ms)");
  for (const Row& row : kRows) {
    const Prediction p = PredictRow(row);
    const double error = p.gen_tok_s_b1 / row.published - 1;
    const StepTime& t = p.step_b1;
    std::printf("%-16s %-18s %-5s %5d %-11s %9.1f %9.1f %+6.1f%%   %.1f / %.1f / %.1f / %.1f\n", row.model,
                row.quant, row.exo ? "exo" : "llama", row.nodes, row.calibration() ? "calibration" : "prediction",
                row.published, p.gen_tok_s_b1, 100 * error, 1e3 * (t.weights_s + t.compute_s), 1e3 * t.collectives_s,
                1e3 * t.hops_s, 1e3 * t.overhead_s);
    EXPECT_TRUE(p.fits) << row.model << " on " << row.nodes << " node(s)";
    // The fit reaches 2.0% on its own rows and the held-out rows come within 3.0%: the bounds
    // leave a little room for the grid, none for a model that stopped predicting.
    EXPECT_LT(std::fabs(error), row.calibration() ? 0.03 : 0.05)
        << row.model << " " << row.nodes << " nodes, " << StackOf(row);
  }
}

TEST(PublishedFigures, EveryChangeGoesTheRightWay) {
  double predicted[10];
  for (int i = 0; i < 10; ++i) predicted[i] = PredictRow(kRows[i]).gen_tok_s_b1;
  // Consecutive rows of one model and stack: the published direction must be predicted.
  int compared = 0;
  for (int i = 1; i < 10; ++i) {
    if (std::string(kRows[i].model) != kRows[i - 1].model || kRows[i].exo != kRows[i - 1].exo) continue;
    const bool published_up = kRows[i].published > kRows[i - 1].published;
    EXPECT_EQ(predicted[i] > predicted[i - 1], published_up) << "row " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 6);
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
