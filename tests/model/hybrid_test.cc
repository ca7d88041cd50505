// Qwen3.5's hybrid model (gated DeltaNet + gated full attention, recurrent state beside the
// KV cache) on a tiny random model written here: four sequences of different lengths batched
// together give the logits and greedy tokens each gives alone; a prompt in one batch, in
// chunks and token by token agree; truncating a sequence resets its recurrent state; the
// DeltaNet step matches its definition computed directly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/context.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/decoder.h"
#include "model/delta_net.h"
#include "model/model.h"
#include "model/recurrent_state.h"

namespace cohort::model {
namespace {

constexpr int kVocab = 96, kEmbd = 64, kLayers = 4, kHead = 4, kHeadKv = 2, kHeadDim = 32;
constexpr int kSsmDim = 16, kKHeads = 2, kVHeads = 4, kConv = 4;
constexpr int kExperts = 8, kUsed = 2, kFfExp = 32;

std::vector<uint8_t> Random(size_t n, float mean, float std_dev, std::mt19937& rng) {
  std::normal_distribution<float> d(mean, std_dev);
  std::vector<uint8_t> bytes(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    const float v = d(rng);
    std::memcpy(bytes.data() + i * sizeof(float), &v, sizeof(float));
  }
  return bytes;
}

// A qwen35moe model of 3 DeltaNet layers and 1 gated attention layer, all F32.
std::string WriteTinyModel(const std::filesystem::path& dir, int n_layers = kLayers) {
  std::mt19937 rng(7);
  gguf::Writer w;
  const std::string a = "qwen35moe.";
  w.SetString("general.architecture", "qwen35moe");
  w.SetUint32(a + "context_length", 256);
  w.SetUint32(a + "embedding_length", kEmbd);
  w.SetUint32(a + "block_count", n_layers);
  w.SetUint32(a + "attention.head_count", kHead);
  w.SetUint32(a + "attention.head_count_kv", kHeadKv);
  w.SetUint32(a + "attention.key_length", kHeadDim);
  w.SetUint32(a + "attention.value_length", kHeadDim);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  w.SetFloat32(a + "rope.freq_base", 10000000.0f);
  w.SetUint32(a + "rope.dimension_count", kHeadDim / 4);
  std::vector<gguf::Value> sections;
  for (int v : {11, 11, 10, 0}) sections.push_back(gguf::Value::Int(gguf::ValueType::kInt32, v));
  w.Set(a + "rope.dimension_sections", gguf::Value::ArrayOf(gguf::ValueType::kInt32, sections));
  w.SetUint32(a + "vocab_size", kVocab);
  w.SetUint32(a + "expert_count", kExperts);
  w.SetUint32(a + "expert_used_count", kUsed);
  w.SetUint32(a + "expert_feed_forward_length", kFfExp);
  w.SetUint32(a + "expert_shared_feed_forward_length", kFfExp);
  w.SetUint32(a + "ssm.conv_kernel", kConv);
  w.SetUint32(a + "ssm.state_size", kSsmDim);
  w.SetUint32(a + "ssm.group_count", kKHeads);
  w.SetUint32(a + "ssm.time_step_rank", kVHeads);
  w.SetUint32(a + "ssm.inner_size", kVHeads * kSsmDim);
  w.SetUint32(a + "full_attention_interval", 4);
  auto mat = [&](const std::string& name, std::vector<int64_t> ne, float mean, float sd) {
    size_t n = 1;
    for (int64_t x : ne) n *= static_cast<size_t>(x);
    w.AddTensor(name, DType::kF32, ne, Random(n, mean, sd, rng));
  };
  const float ws = 1.0f / std::sqrt(static_cast<float>(kEmbd));
  mat("token_embd.weight", {kEmbd, kVocab}, 0, 1.0f);
  mat("output_norm.weight", {kEmbd}, 1, 0.1f);
  mat("output.weight", {kEmbd, kVocab}, 0, ws);
  const int kw = kKHeads * kSsmDim, vw = kVHeads * kSsmDim;
  for (int l = 0; l < n_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    mat(p + "attn_norm.weight", {kEmbd}, 1, 0.1f);
    mat(p + "post_attention_norm.weight", {kEmbd}, 1, 0.1f);
    if ((l + 1) % 4 != 0) {
      mat(p + "attn_qkv.weight", {kEmbd, 2 * kw + vw}, 0, ws);
      mat(p + "attn_gate.weight", {kEmbd, vw}, 0, ws);
      mat(p + "ssm_beta.weight", {kEmbd, kVHeads}, 0, ws);
      mat(p + "ssm_alpha.weight", {kEmbd, kVHeads}, 0, ws);
      mat(p + "ssm_conv1d.weight", {kConv, 2 * kw + vw}, 0, 0.5f);
      mat(p + "ssm_dt.bias", {kVHeads}, 0.5f, 0.3f);
      mat(p + "ssm_a", {kVHeads}, -1.0f, 0.3f);
      mat(p + "ssm_norm.weight", {kSsmDim}, 1, 0.1f);
      mat(p + "ssm_out.weight", {vw, kEmbd}, 0, 1.0f / std::sqrt(static_cast<float>(vw)));
    } else {
      mat(p + "attn_q.weight", {kEmbd, 2 * kHead * kHeadDim}, 0, ws);
      mat(p + "attn_k.weight", {kEmbd, kHeadKv * kHeadDim}, 0, ws);
      mat(p + "attn_v.weight", {kEmbd, kHeadKv * kHeadDim}, 0, ws);
      mat(p + "attn_output.weight", {kHead * kHeadDim, kEmbd}, 0, ws);
      mat(p + "attn_q_norm.weight", {kHeadDim}, 1, 0.1f);
      mat(p + "attn_k_norm.weight", {kHeadDim}, 1, 0.1f);
    }
    mat(p + "ffn_gate_inp.weight", {kEmbd, kExperts}, 0, ws);
    mat(p + "ffn_gate_exps.weight", {kEmbd, kFfExp, kExperts}, 0, ws);
    mat(p + "ffn_up_exps.weight", {kEmbd, kFfExp, kExperts}, 0, ws);
    mat(p + "ffn_down_exps.weight", {kFfExp, kEmbd, kExperts}, 0, 0.2f);
    mat(p + "ffn_gate_shexp.weight", {kEmbd, kFfExp}, 0, ws);
    mat(p + "ffn_up_shexp.weight", {kEmbd, kFfExp}, 0, ws);
    mat(p + "ffn_down_shexp.weight", {kFfExp, kEmbd}, 0, 0.2f);
    mat(p + "ffn_gate_inp_shexp.weight", {kEmbd}, 0, ws);
  }
  const std::string path = (dir / ("tiny-qwen35moe-" + std::to_string(n_layers) + ".gguf")).string();
  EXPECT_TRUE(w.WriteFile(path).ok());
  return path;
}

class HybridTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cohort-hybrid-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    auto file = gguf::File::Open(WriteTinyModel(dir_));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    file_ = std::move(*file);
    auto model = Model::Load(*file_);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(*model);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<KvCache> Cache(int n_seq, DType type = DType::kF32) {
    KvCacheOptions o;
    o.n_ctx = 64;
    o.n_seq = n_seq;
    o.type = type;
    auto c = model_->NewKvCache(o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(*c);
  }

  // Logits of every token of `tokens` on slot `seq`, fed in batches of `chunk`.
  std::vector<float> Run(KvCache& cache, const std::vector<int32_t>& tokens, size_t chunk, int seq = 0) {
    std::vector<float> out(tokens.size() * kVocab);
    for (size_t i = 0; i < tokens.size(); i += chunk) {
      Batch b;
      const size_t n = std::min(chunk, tokens.size() - i);
      for (size_t j = 0; j < n; ++j) b.Add(tokens[i + j], static_cast<int>(i + j), seq, true);
      const Status s = model_->Forward(ctx_, b, cache, std::span<float>(out.data() + i * kVocab, n * kVocab));
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<Model> model_;
  ThreadPool pool_{2};
  Context ctx_{&pool_, nullptr};
};

int Argmax(const float* x) {
  int best = 0;
  for (int v = 1; v < kVocab; ++v) best = x[v] > x[best] ? v : best;
  return best;
}

TEST_F(HybridTest, ConfigSaysWhichLayersAreRecurrent) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.arch, Arch::kQwen35Moe);
  ASSERT_EQ(c.ssm.recurrent.size(), 4u);
  EXPECT_EQ(c.ssm.recurrent, (std::vector<uint8_t>{1, 1, 1, 0}));
  EXPECT_EQ(c.rope.n_rot, kHeadDim / 4);
  EXPECT_EQ(c.moe.n_expert_shared, 1);
  auto cache = Cache(3);
  auto* state = dynamic_cast<RecurrentState*>(cache->sequence_state());
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->n_layer(), 3);
  EXPECT_EQ(state->delta_floats(), kVHeads * kSsmDim * kSsmDim);
  EXPECT_EQ(state->conv_floats(), (2 * kKHeads + kVHeads) * kSsmDim * (kConv - 1));
  EXPECT_GE(cache->bytes(), state->bytes());
}

TEST_F(HybridTest, PromptInOneBatchChunksOrTokensAgree) {
  const std::vector<int32_t> t = {1, 5, 9, 33, 2, 70, 70, 12, 95, 4, 8};
  auto c1 = Cache(1), c2 = Cache(1), c3 = Cache(1);
  const auto whole = Run(*c1, t, t.size());
  const auto chunks = Run(*c2, t, 3);
  const auto single = Run(*c3, t, 1);
  for (size_t i = 0; i < whole.size(); ++i) {
    ASSERT_NEAR(whole[i], single[i], 2e-4f) << "row " << i / kVocab;
    ASSERT_NEAR(chunks[i], single[i], 2e-4f) << "row " << i / kVocab;
  }
}

TEST_F(HybridTest, FourSequencesBatchedGiveTheirSoloLogitsAndTokens) {
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 2, 3}, {40, 41, 42, 43, 44, 45, 46}, {7}, {90, 10, 80, 20, 70}};
  constexpr int kGen = 8;
  // Alone: each prompt in one batch on a fresh cache, then greedy decoding.
  std::vector<std::vector<float>> solo_logits(4);
  std::vector<std::vector<int32_t>> solo_tokens(4);
  for (int s = 0; s < 4; ++s) {
    auto cache = Cache(1);
    std::vector<float> rows = Run(*cache, prompts[s], prompts[s].size());
    int next = Argmax(rows.data() + (prompts[s].size() - 1) * kVocab);
    std::vector<float> logits(kVocab);
    for (int g = 0; g < kGen; ++g) {
      solo_tokens[s].push_back(next);
      Batch b;
      b.Add(next, static_cast<int>(prompts[s].size()) + g, 0, true);
      ASSERT_TRUE(model_->Forward(ctx_, b, *cache, logits).ok());
      rows.insert(rows.end(), logits.begin(), logits.end());
      next = Argmax(logits.data());
    }
    solo_logits[s] = rows;
  }
  // Together: the prompts interleaved in one batch (slots in another order than the
  // sequences), then every sequence's decode step in one batch.
  auto cache = Cache(4);
  const int slot[4] = {2, 0, 3, 1};
  Batch b;
  std::vector<std::pair<int, int>> rows;  // (sequence, position) of each logits row
  for (size_t i = 0; i < 7; ++i) {
    for (int s = 0; s < 4; ++s) {
      if (i < prompts[s].size()) {
        b.Add(prompts[s][i], static_cast<int>(i), slot[s], true);
        rows.push_back({s, static_cast<int>(i)});
      }
    }
  }
  std::vector<int32_t> next(4);
  std::vector<std::vector<int32_t>> got_tokens(4);
  for (int step = 0; step <= kGen; ++step) {
    std::vector<float> logits(b.n_logits() * kVocab);
    ASSERT_TRUE(model_->Forward(ctx_, b, *cache, logits).ok());
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto [s, pos] = rows[r];
      const float* want = solo_logits[s].data() + pos * kVocab;
      for (int v = 0; v < kVocab; ++v) {
        ASSERT_NEAR(logits[r * kVocab + v], want[v], 1e-4f) << "seq " << s << " pos " << pos;
      }
      if (pos + 1 >= static_cast<int>(prompts[s].size())) next[s] = Argmax(logits.data() + r * kVocab);
    }
    if (step == kGen) break;
    b.Clear();
    rows.clear();
    for (int s : {3, 1, 0, 2}) {
      got_tokens[s].push_back(next[s]);
      const int pos = static_cast<int>(prompts[s].size()) + step;
      b.Add(next[s], pos, slot[s], true);
      rows.push_back({s, pos});
    }
  }
  for (int s = 0; s < 4; ++s) EXPECT_EQ(got_tokens[s], solo_tokens[s]) << "seq " << s;
}

TEST_F(HybridTest, TruncatingResetsTheRecurrentState) {
  const std::vector<int32_t> a = {3, 14, 15, 92, 65}, b = {27, 18, 28};
  auto fresh = Cache(1);
  const auto want = Run(*fresh, b, b.size());
  auto cache = Cache(1);
  Run(*cache, a, a.size());
  // A middle position cannot be honoured by a recurrent state: the whole sequence goes.
  cache->Truncate(0, 2);
  EXPECT_EQ(cache->length(0), 0);
  EXPECT_EQ(Run(*cache, b, b.size()), want);
  // Truncating at or past the end keeps the sequence.
  cache->Truncate(0, 10);
  EXPECT_EQ(cache->length(0), 3);
  cache->Truncate(0, 0);
  EXPECT_EQ(cache->length(0), 0);
  EXPECT_EQ(Run(*cache, b, 1), Run(*Cache(1), b, 1));
}

// A Q8_0 cache (--kv-type q8_0) holds each KV head's rows as whole 34-byte blocks; the gated
// attention finds every head's (it once stepped 4 bytes per element, reading KV head 1 from
// the wrong place). Its logits differ from an F32 cache's by 8-bit rounding alone.
TEST_F(HybridTest, AQ8_0CacheDiffersFromF32OnlyByQuantization) {
  const std::vector<int32_t> t = {1, 5, 9, 33, 2, 70, 70, 12, 95, 4, 8};
  const auto f32 = Run(*Cache(1), t, t.size());
  const auto q8 = Run(*Cache(1, DType::kQ8_0), t, t.size());
  const auto q8_single = Run(*Cache(1, DType::kQ8_0), t, 1);
  float max_abs = 0.0f, peak = 0.0f;
  int argmax_agree = 0;
  for (size_t i = 0; i < f32.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(q8[i] - f32[i]));
    peak = std::max(peak, std::fabs(f32[i]));
    ASSERT_NEAR(q8[i], q8_single[i], 2e-4f) << "row " << i / kVocab;
  }
  for (size_t r = 0; r < t.size(); ++r) argmax_agree += Argmax(&q8[r * kVocab]) == Argmax(&f32[r * kVocab]);
  std::printf("[ q8_0 ] hybrid vs f32 cache: max_abs %.3g (logits up to %.3g), argmax agree %d/%zu\n", max_abs,
              peak, argmax_agree, t.size());
  EXPECT_GT(max_abs, 0.0f) << "the rows were not quantized";
  EXPECT_LE(max_abs, 0.05f * peak);
  EXPECT_GE(argmax_agree, static_cast<int>(t.size()) - 1);
}

TEST_F(HybridTest, AModelOfDeltaNetLayersOnlyAdvancesItsSequences) {
  auto file = gguf::File::Open(WriteTinyModel(dir_, 2));
  ASSERT_TRUE(file.ok());
  auto model = Model::Load(**file);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config().ssm.recurrent, (std::vector<uint8_t>{1, 1}));
  KvCacheOptions o;
  o.n_ctx = 16;
  auto cache = (*model)->NewKvCache(o);
  ASSERT_TRUE(cache.ok());
  std::vector<float> logits(3 * kVocab);
  Batch b;
  for (int i = 0; i < 3; ++i) b.Add(10 + i, i, 0, true);
  ASSERT_TRUE((*model)->Forward(ctx_, b, **cache, logits).ok());
  EXPECT_EQ((*cache)->length(0), 3);
  b.Clear();
  b.Add(20, 3, 0, true);
  EXPECT_TRUE((*model)->Forward(ctx_, b, **cache, logits).ok());
  EXPECT_EQ((*cache)->length(0), 4);
}

// Tensor parallelism splits the DeltaNet layers by key heads, in the proportion of the rank's
// attention heads: a share that would take no key head is refused with a clear error, one
// that takes some holds their state only. (That the shares' partial sums give llama.cpp's
// logits: tests/parallel/arch_golden_test.cc, tp2 and tp3.)
TEST_F(HybridTest, DeltaNetSharesByKeyHeads) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(DeltaNetHeadsOf(c, {0, kHead}).size(), kKHeads);
  EXPECT_EQ(DeltaNetHeadsOf(c, {0, 2}).end, 1);
  EXPECT_EQ(DeltaNetHeadsOf(c, {2, 4}).begin, 1);
  auto* decoder = dynamic_cast<Decoder*>(model_.get());
  ASSERT_NE(decoder, nullptr);
  StageShard shard = decoder->stage_shard();
  shard.layer.heads = {0, 1};  // a quarter of the attention heads: [0, 1/2) of the key heads
  ASSERT_TRUE(decoder->SetStageShard(shard).ok());
  KvCacheOptions o;
  o.n_ctx = 16;
  auto refused = model_->NewKvCache(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("no DeltaNet key head"), std::string::npos) << refused.status().ToString();

  // Half the attention heads take one key head (and its two value heads): a cache for it.
  shard.layer.heads = {2, 4};
  ASSERT_TRUE(decoder->SetStageShard(shard).ok());
  auto half = model_->NewKvCache(o);
  ASSERT_TRUE(half.ok()) << half.status().ToString();
  auto* state = dynamic_cast<RecurrentState*>((*half)->sequence_state());
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->delta_floats(), (kVHeads / kKHeads) * kSsmDim * kSsmDim);
  EXPECT_EQ(state->conv_floats(), (2 + kVHeads / kKHeads) * kSsmDim * (kConv - 1));
}

TEST(DeltaNetStep, MatchesTheGatedDeltaRule) {
  constexpr int d = 8;
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0, 1);
  std::vector<float> state(d * d), q(d), k(d), v(d);
  for (float& x : state) x = n(rng);
  for (int i = 0; i < d; ++i) q[i] = n(rng), k[i] = n(rng), v[i] = n(rng);
  const float g = -0.3f, beta = 0.7f;
  // S[j][i] (value j, key i): S *= e^g; S += beta (v - S k) k^T; o = S q / sqrt(d).
  std::vector<double> s(state.begin(), state.end()), want(d);
  for (double& x : s) x *= std::exp(static_cast<double>(g));
  for (int j = 0; j < d; ++j) {
    double sk = 0;
    for (int i = 0; i < d; ++i) sk += s[j * d + i] * k[i];
    const double delta = beta * (v[j] - sk);
    for (int i = 0; i < d; ++i) s[j * d + i] += delta * k[i];
  }
  for (int j = 0; j < d; ++j) {
    double o = 0;
    for (int i = 0; i < d; ++i) o += s[j * d + i] * q[i];
    want[j] = o / std::sqrt(static_cast<double>(d));
  }
  std::vector<float> o(d);
  DeltaNetStep(d, q.data(), k.data(), v.data(), g, beta, state.data(), o.data());
  for (int j = 0; j < d; ++j) EXPECT_NEAR(o[j], want[j], 1e-5) << j;
  for (int i = 0; i < d * d; ++i) EXPECT_NEAR(state[i], s[i], 1e-5) << i;
}

}  // namespace
}  // namespace cohort::model
