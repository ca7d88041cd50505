// gpt-oss on a tiny synthesized model (`cohort synth --shape gpt-oss-test`: 2 layers, layer 0
// sliding over 8 positions, layer 1 full, sinks, biases, 2-of-8 experts), F32 and with MXFP4
// experts: the config read back from the file, and continuous batching across the window:
// four sequences of different lengths, prompts and decode steps batched together, each give
// exactly the tokens they give alone. (Logits against llama.cpp: tests/apps/synth_golden_test.)
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>

#include "golden_util.h"
#include "model/config.h"
#include "model/synth.h"

namespace cohort::model::testing {
namespace {

struct Synthesized {
  std::filesystem::path dir;
  Loaded loaded;
  ~Synthesized() {
    loaded = {};
    std::filesystem::remove_all(dir);
  }
};

std::unique_ptr<Synthesized> SynthGptOss(const std::string& type) {
  auto s = std::make_unique<Synthesized>();
  s->dir = std::filesystem::temp_directory_path() / ("cohort-gpt-oss-" + type + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(s->dir);
  SynthOptions o;
  o.shape = "gpt-oss-test";
  o.type = type;
  o.pure = true;
  o.vocab_dir = std::string(COHORT_EXTERNAL_DATA) + "/vocab";
  o.output = (s->dir / "model.gguf").string();
  ThreadPool pool(2);
  const Status st = Synthesize(o, &pool);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return s;
  auto file = gguf::File::Open(o.output);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return s;
  s->loaded.file = std::move(*file);
  auto model = Model::Load(*s->loaded.file);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (model.ok()) s->loaded.model = std::move(*model);
  return s;
}

int32_t Argmax(const float* row, int n) {
  int32_t best = 0;
  for (int v = 1; v < n; ++v) {
    if (row[v] > row[best]) best = v;
  }
  return best;
}

class GptOssTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GptOssTest, ConfigReadsWindowSinksAndRouting) {
  auto s = SynthGptOss(GetParam());
  ASSERT_NE(s->loaded.model, nullptr);
  const ModelConfig& c = s->loaded.model->config();
  EXPECT_EQ(c.arch, Arch::kGptOss);
  EXPECT_EQ(c.n_swa, 8);
  EXPECT_TRUE(c.is_swa_layer(0));
  EXPECT_FALSE(c.is_swa_layer(1));
  EXPECT_TRUE(c.attn_sinks && c.qkv_bias && c.attn_out_bias);
  EXPECT_EQ(c.moe.gating, ExpertGating::kSoftmaxWeight);
  EXPECT_EQ(c.moe.activation, ExpertActivation::kSwiGluOai);
  EXPECT_EQ(c.rope.type, RopeType::kNeox);
  EXPECT_TRUE(c.rope.yarn);
  EXPECT_FLOAT_EQ(c.rope.freq_scale, 1.0f / 32.0f);
  const gguf::TensorInfo* up = s->loaded.file->FindTensor("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->type, std::string(GetParam()) == "mxfp4" ? DType::kMXFP4 : DType::kF32);
}

TEST_P(GptOssTest, FourSequencesBatchedAcrossTheWindowGiveTheirSoloTokens) {
  auto s = SynthGptOss(GetParam());
  ASSERT_NE(s->loaded.model, nullptr);
  Model& model = *s->loaded.model;
  ThreadPool pool(2);
  const Context ctx{&pool, nullptr};
  const int n_vocab = model.config().n_vocab;
  const size_t n_gen = 12;
  // Prompt lengths below, at and past the window of 8; generation takes every one past it.
  const std::vector<std::vector<int32_t>> prompts = {
      {11, 200, 3000},
      {5, 17, 29, 400, 4000, 80, 9000, 123},
      {7, 70, 700, 7000, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
      {42, 4242, 24, 2424, 300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317}};
  std::vector<std::vector<int32_t>> solo(prompts.size());
  for (size_t q = 0; q < prompts.size(); ++q) {
    KvCacheOptions o;
    o.n_ctx = 64;
    auto cache = model.NewKvCache(o);
    ASSERT_TRUE(cache.ok());
    solo[q] = GreedyDecode(model, ctx, **cache, prompts[q], n_gen);
    ASSERT_EQ(solo[q].size(), n_gen);
  }

  KvCacheOptions o;
  o.n_ctx = 64;
  o.n_seq = 4;
  auto cache = model.NewKvCache(o);
  ASSERT_TRUE(cache.ok());
  // All prompts in one batch, interleaved, the slots in reverse order of the sequences.
  Batch batch;
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  std::vector<int> row_of(prompts.size());
  int rows = 0;
  for (size_t i = 0; i < longest; ++i) {
    for (size_t q = 0; q < prompts.size(); ++q) {
      if (i >= prompts[q].size()) continue;
      const bool last = i + 1 == prompts[q].size();
      if (last) row_of[q] = rows++;
      batch.Add(prompts[q][i], static_cast<int>(i), static_cast<int>(3 - q), last);
    }
  }
  std::vector<float> logits(static_cast<size_t>(rows) * n_vocab);
  ASSERT_TRUE(model.Forward(ctx, batch, **cache, logits).ok());
  std::vector<std::vector<int32_t>> batched(prompts.size());
  for (size_t q = 0; q < prompts.size(); ++q) batched[q].push_back(Argmax(logits.data() + row_of[q] * n_vocab, n_vocab));
  for (size_t k = 1; k < n_gen; ++k) {
    batch.Clear();
    for (size_t q = 0; q < prompts.size(); ++q) {
      batch.Add(batched[q].back(), static_cast<int>(prompts[q].size() + k - 1), static_cast<int>(3 - q), true);
    }
    logits.assign(prompts.size() * n_vocab, 0.0f);
    ASSERT_TRUE(model.Forward(ctx, batch, **cache, logits).ok());
    for (size_t q = 0; q < prompts.size(); ++q) batched[q].push_back(Argmax(logits.data() + q * n_vocab, n_vocab));
  }
  for (size_t q = 0; q < prompts.size(); ++q) EXPECT_EQ(batched[q], solo[q]) << "sequence " << q;
}

INSTANTIATE_TEST_SUITE_P(Types, GptOssTest, ::testing::Values("f32", "mxfp4"), FixtureParamName);

}  // namespace
}  // namespace cohort::model::testing
