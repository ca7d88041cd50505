// ModelConfig::FromGguf on the fixtures: the values llama.cpp prints at load for each
// architecture (README), and the YaRN-derived factors for a DeepSeek-V3-style config.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/config.h"

namespace cohort::model {
namespace {

ModelConfig Load(const char* name) {
  auto file = gguf::File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf");
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto c = ModelConfig::FromGguf(**file);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ConfigTest, Llama) {
  const ModelConfig c = Load("tiny-llama-f32");
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim_k, 64);
  EXPECT_EQ(c.n_ff, 512);
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.n_ctx_train, 256);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope.freq_base, 500000.0f);
  EXPECT_EQ(c.rope.type, RopeType::kNorm);
  EXPECT_EQ(c.rope.n_rot, 64);
  EXPECT_FALSE(c.rope.yarn);
  EXPECT_FLOAT_EQ(c.rope.freq_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.kq_scale, 0.125f);
  EXPECT_FALSE(c.tied_output);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(c.moe.n_expert, 0);
}

TEST(ConfigTest, QwenFamily) {
  const ModelConfig q2 = Load("tiny-qwen2-f32");
  EXPECT_EQ(q2.rope.type, RopeType::kNeox);
  EXPECT_TRUE(q2.qkv_bias);
  EXPECT_TRUE(q2.tied_output);
  const ModelConfig q3 = Load("tiny-qwen3-f32");
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_TRUE(q3.tied_output);
  const ModelConfig moe = Load("tiny-qwen3moe-f32");
  EXPECT_EQ(moe.moe.n_expert, 8);
  EXPECT_EQ(moe.moe.n_expert_used, 2);
  EXPECT_EQ(moe.moe.n_ff_expert, 64);
  EXPECT_EQ(moe.moe.gating, ExpertGating::kSoftmax);
  EXPECT_TRUE(moe.moe.norm_top_k);
  EXPECT_TRUE(moe.is_moe_layer(0));
  EXPECT_FALSE(moe.tied_output);
}

TEST(ConfigTest, Deepseek2) {
  const ModelConfig c = Load("tiny-deepseek2-f32");
  EXPECT_EQ(c.arch, Arch::kDeepseek2);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.mla.q_lora_rank, 64);
  EXPECT_EQ(c.mla.kv_lora_rank, 64);
  EXPECT_EQ(c.mla.qk_nope_dim, 32);
  EXPECT_EQ(c.mla.qk_rope_dim, 32);
  EXPECT_EQ(c.mla.v_head_dim, 32);
  EXPECT_EQ(c.rope.n_rot, 32);
  EXPECT_FLOAT_EQ(c.kq_scale, 0.125f);  // 1/sqrt(32 + 32), not 1/sqrt(96)
  EXPECT_EQ(c.moe.n_expert, 8);
  EXPECT_EQ(c.moe.n_expert_shared, 1);
  EXPECT_EQ(c.moe.n_ff_expert, 32);
  EXPECT_EQ(c.moe.n_leading_dense, 1);
  EXPECT_EQ(c.moe.gating, ExpertGating::kSigmoid);
  EXPECT_TRUE(c.moe.norm_top_k);
  EXPECT_FLOAT_EQ(c.moe.weights_scale, 2.5f);
  EXPECT_EQ(c.moe.n_group, 1);
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
}

// The deepseek2 fixture with DeepSeek-V3's YaRN and expert-group metadata added.
TEST(ConfigTest, Deepseek2YarnAndGroups) {
  auto src = gguf::File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-deepseek2-f32.gguf");
  ASSERT_TRUE(src.ok());
  gguf::Writer w;
  for (const gguf::KeyValue& kv : (*src)->metadata()) {
    if (kv.key != "general.alignment") w.Set(kv.key, kv.value);
  }
  w.SetString("deepseek2.rope.scaling.type", "yarn");
  w.SetFloat32("deepseek2.rope.scaling.factor", 40.0f);
  w.SetUint32("deepseek2.rope.scaling.original_context_length", 4096);
  w.SetFloat32("deepseek2.rope.scaling.yarn_log_multiplier", 0.1f);
  w.SetUint32("deepseek2.expert_group_count", 4);
  w.SetUint32("deepseek2.expert_group_used_count", 2);
  const std::vector<uint8_t> bytes = w.Serialize();
  auto file = gguf::File::Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->rope.yarn);
  EXPECT_FLOAT_EQ(c->rope.freq_scale, 1.0f / 40.0f);
  EXPECT_FLOAT_EQ(c->rope.ext_factor, 1.0f);
  EXPECT_EQ(c->rope.n_ctx_orig, 4096);
  EXPECT_NEAR(c->rope.yarn_log_mul, 1.0f, 1e-6f);
  // llama.cpp: attn_factor = 1 / (1 + 0.1 ln 40); mscale = 1 + 0.1 ln 40; kq = mscale^2 / 8.
  const float m = 1.0f + 0.1f * std::log(40.0f);
  EXPECT_NEAR(c->rope.attn_factor, 1.0f / m, 1e-6f);
  EXPECT_NEAR(c->kq_scale, m * m / 8.0f, 1e-6f);
  EXPECT_EQ(c->moe.n_group, 4);
  EXPECT_EQ(c->moe.n_group_used, 2);
}

TEST(ConfigTest, MissingRequiredKeyNamesIt) {
  auto src = gguf::File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf");
  ASSERT_TRUE(src.ok());
  gguf::Writer w;
  for (const gguf::KeyValue& kv : (*src)->metadata()) {
    if (kv.key != "general.alignment" && kv.key != "llama.embedding_length") w.Set(kv.key, kv.value);
  }
  const std::vector<uint8_t> bytes = w.Serialize();
  auto file = gguf::File::Parse(bytes);
  ASSERT_TRUE(file.ok());
  auto c = ModelConfig::FromGguf(**file);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("llama.embedding_length"), std::string::npos)
      << c.status().ToString();
}

}  // namespace
}  // namespace cohort::model
