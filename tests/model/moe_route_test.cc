// Expert routing against hand-computed cases: softmax top-k with renormalisation (qwen3moe),
// sigmoid with a selection-only bias and weight scale (DeepSeek-V3), grouped selection.
#include <gtest/gtest.h>

#include <cmath>

#include "model/moe_ffn.h"

namespace cohort::model {
namespace {

float Sig(float x) { return 1.0f / (1.0f + std::exp(-x)); }

TEST(MoeRouteTest, SoftmaxTopKRenormalised) {
  MoeConfig c;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSoftmax;
  c.norm_top_k = true;
  c.weights_scale = 0.0f;
  const float logits[] = {0.1f, 2.0f, -1.0f, 1.5f};
  std::vector<float> work;
  std::vector<int32_t> order;
  Routing r;
  Route(c, nullptr, logits, 1, work, order, r);
  ASSERT_EQ(r.experts.size(), 2u);
  EXPECT_EQ(r.experts[0], 1);
  EXPECT_EQ(r.experts[1], 3);
  const float e1 = std::exp(2.0f), e3 = std::exp(1.5f);
  EXPECT_NEAR(r.weights[0], e1 / (e1 + e3), 1e-6f);
  EXPECT_NEAR(r.weights[1], e3 / (e1 + e3), 1e-6f);
}

TEST(MoeRouteTest, SigmoidBiasSelectsButDoesNotWeigh) {
  MoeConfig c;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSigmoid;
  c.norm_top_k = true;
  c.weights_scale = 2.5f;
  const float logits[] = {1.0f, 0.9f, 0.0f, -2.0f};
  const float bias[] = {0.0f, 0.0f, 0.5f, 0.0f};  // lifts expert 2 above expert 1
  std::vector<float> work;
  std::vector<int32_t> order;
  Routing r;
  Route(c, bias, logits, 1, work, order, r);
  // Selection scores: 0.731, 0.711, 1.0, 0.119: expert 2 first, then 0.
  EXPECT_EQ(r.experts[0], 2);
  EXPECT_EQ(r.experts[1], 0);
  const float s0 = Sig(1.0f), s2 = Sig(0.0f);
  EXPECT_NEAR(r.weights[0], 2.5f * s2 / (s0 + s2), 1e-6f);
  EXPECT_NEAR(r.weights[1], 2.5f * s0 / (s0 + s2), 1e-6f);
}

TEST(MoeRouteTest, GroupedSelectionDropsWeakGroups) {
  MoeConfig c;
  c.n_expert = 8;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSigmoid;
  c.norm_top_k = false;
  c.weights_scale = 0.0f;
  c.n_group = 4;       // groups {0,1} {2,3} {4,5} {6,7}
  c.n_group_used = 1;
  // Expert 0 is the single best, but group {4,5} has the best top-2 sum.
  const float logits[] = {3.0f, -3.0f, 0.0f, 0.0f, 2.0f, 1.9f, -1.0f, -1.0f};
  std::vector<float> work;
  std::vector<int32_t> order;
  Routing r;
  Route(c, nullptr, logits, 1, work, order, r);
  EXPECT_EQ(r.experts[0], 4);
  EXPECT_EQ(r.experts[1], 5);
  EXPECT_NEAR(r.weights[0], Sig(2.0f), 1e-6f);
  EXPECT_NEAR(r.weights[1], Sig(1.9f), 1e-6f);
}

}  // namespace
}  // namespace cohort::model
