// Qwen3.5's built-in shapes: counting their DeltaNet and gated-attention layers gives the
// published sizes (397B with 17B active, 35B with 3B active, 0.8B), the recurrent state is a
// fixed size per sequence, and only the full-attention layers hold KV rows.
#include <gtest/gtest.h>

#include "plan/model_shape.h"

namespace cohort::plan {
namespace {

TEST(HybridShape, Qwen35CountsMatchThePublishedSizes) {
  struct Row {
    const char* name;
    double total_b, active_b;
  } rows[] = {{"qwen3.5-397b-a17b", 397, 17}, {"qwen3.5-35b-a3b", 35, 3}, {"qwen3.5-0.8b", 0.8, 0.8}};
  for (const Row& r : rows) {
    auto m = FindBuiltinShape(r.name);
    ASSERT_TRUE(m.ok()) << r.name;
    ASSERT_TRUE(m->Validate().ok()) << r.name;
    EXPECT_TRUE(m->is_hybrid());
    EXPECT_NEAR(m->TotalParams() / 1e9, r.total_b, 0.06 * r.total_b) << r.name;
    EXPECT_NEAR(m->ActiveParams() / 1e9, r.active_b, 0.1 * r.active_b) << r.name;
  }
}

TEST(HybridShape, EveryFourthLayerIsFullAttention) {
  const ModelShape m = *FindBuiltinShape("qwen3.5-35b-a3b");
  EXPECT_EQ(m.n_recurrent_layers(), 30);
  EXPECT_FALSE(m.is_recurrent_layer(3));
  EXPECT_TRUE(m.is_recurrent_layer(4));
  // KV rows in 10 of 40 layers: a quarter of a full-attention layer's width on average.
  EXPECT_DOUBLE_EQ(m.KvElementsPerToken(), 2.0 * (256 + 256) * 10 / 40);
  // Per sequence: 30 layers of 3 conv inputs x 8192 channels and 32 heads of 128 x 128.
  EXPECT_DOUBLE_EQ(m.RecurrentStateElements(), 30.0 * (3 * 8192 + 32 * 128 * 128));
  ModelShape bad = m;
  bad.ssm_k_heads = 3;  // does not divide 32 value heads
  EXPECT_FALSE(bad.Validate().ok());
}

}  // namespace
}  // namespace cohort::plan
