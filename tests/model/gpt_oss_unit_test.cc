// gpt-oss's routing and activation: experts chosen by the raw router logits with a softmax over
// the chosen ones (llama.cpp's SOFTMAX_WEIGHT gating), and the clamped SwiGLU (ggml_swiglu_oai,
// alpha 1.702, limit 7), against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "model/moe_ffn.h"

namespace cohort::model {
namespace {

TEST(GptOssRouting, SoftmaxOverTheChosenLogits) {
  MoeConfig c;
  c.n_expert = 5;
  c.n_expert_used = 2;
  c.gating = ExpertGating::kSoftmaxWeight;
  // Token 0: experts 3 (2.0) and 1 (1.0); token 1: 0 (0.5) and 4 (0.25), the others lower.
  const float logits[10] = {-1.0f, 1.0f, 0.0f, 2.0f, -3.0f, 0.5f, -2.0f, -1.0f, 0.1f, 0.25f};
  std::vector<float> work;
  std::vector<int32_t> order;
  Routing r;
  Route(c, nullptr, logits, 2, work, order, r);
  ASSERT_EQ(r.n_used, 2);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{3, 1, 0, 4}));
  const float e1 = 1.0f / (1.0f + std::exp(-1.0f));  // softmax of (2, 1): sigmoid(1)
  EXPECT_NEAR(r.weights[0], e1, 1e-6f);
  EXPECT_NEAR(r.weights[1], 1.0f - e1, 1e-6f);
  const float e2 = 1.0f / (1.0f + std::exp(-0.25f));
  EXPECT_NEAR(r.weights[2], e2, 1e-6f);
  EXPECT_NEAR(r.weights[3], 1.0f - e2, 1e-6f);
}

TEST(GptOssActivation, ClampedSwiGlu) {
  const float gate[4] = {10.0f, 1.0f, -2.0f, 7.0f};
  const float up[4] = {-9.0f, 0.5f, 8.0f, -7.5f};
  float out[4];
  kernels::SwiGluOai(gate, up, 4, 1.702f, 7.0f, out);
  auto glu = [](float g) { return g / (1.0f + std::exp(-1.702f * g)); };
  EXPECT_FLOAT_EQ(out[0], glu(7.0f) * (-7.0f + 1.0f));  // gate clamped above, up below
  EXPECT_FLOAT_EQ(out[1], glu(1.0f) * 1.5f);
  EXPECT_FLOAT_EQ(out[2], glu(-2.0f) * 8.0f);          // gate has no lower clamp; up at +7
  EXPECT_FLOAT_EQ(out[3], glu(7.0f) * -6.0f);
}

}  // namespace
}  // namespace cohort::model
