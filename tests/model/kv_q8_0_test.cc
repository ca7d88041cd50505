// The Q8_0 KV cache (--kv-type q8_0): rows stored as ggml's Q8_0 blocks, and attention that
// reads them as llama.cpp's CPU flash-attention kernel does. Its logits must match llama.cpp's
// with -ctk q8_0 -ctv q8_0 (tests/data/kv-q8_0, made by tools/make-kv-q8_0-goldens.sh) within
// the quantized fixtures' tolerance, and differ from an F32 cache's (the rows are quantized).
#include <cstdio>
#include <filesystem>

#include "golden_util.h"
#include "kernels/quant.h"
#include "model/attention_core.h"

namespace cohort::model::testing {
namespace {

// The golden suite's criterion for quantized numerics (golden_test.cc).
constexpr float kQuantMaxTol = 0.3f;
constexpr float kQuantRowTol = 1e-3f;
constexpr double kQuantRowsFraction = 0.9;

TEST(KvCacheQ8_0, RowsRoundTripWithinHalfAStep) {
  KvCacheOptions o;
  o.n_ctx = 4;
  o.type = DType::kQ8_0;
  KvCache cache(o, 2, 64, 32);
  EXPECT_EQ(cache.k_row_bytes(), 2 * 34);
  EXPECT_EQ(cache.v_row_bytes(), 34);
  EXPECT_EQ(cache.ElementsBytes(32), 34);
  EXPECT_EQ(cache.RowsBytes(3), 2 * 3 * (68 + 34));
  std::vector<float> k(64), v(32), back(64);
  for (int i = 0; i < 64; ++i) k[i] = std::sin(0.37f * i) * (i < 32 ? 1.0f : 100.0f);
  for (int i = 0; i < 32; ++i) v[i] = 0.01f * i - 0.1f;
  cache.Store(1, 0, 2, k.data(), v.data());
  cache.LoadK(1, 0, 2, back.data());
  for (int i = 0; i < 64; ++i) {
    const float amax = i < 32 ? 1.0f : 100.0f;
    EXPECT_NEAR(back[i], k[i], amax / 127.0f * 0.5f + 1e-3f * amax) << i;
  }
  cache.LoadV(1, 0, 2, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], v[i], 0.22f / 127.0f);
  EXPECT_EQ(cache.length(0), 3);
}

TEST(KvCacheQ8_0, WidthsMustBeWholeBlocks) {
  KvCacheOptions o;
  o.n_ctx = 4;
  o.type = DType::kQ8_0;
  EXPECT_TRUE(KvCache::CheckWidths(o, 64, 64).ok());
  EXPECT_FALSE(KvCache::CheckWidths(o, 48, 48).ok());
  o.type = DType::kF16;
  EXPECT_TRUE(KvCache::CheckWidths(o, 48, 48).ok());
}

// Attention over a Q8_0 cache equals plain softmax attention over the rows it holds (and the
// query as Q8_0 holds it), to float rounding: the online softmax loses nothing.
TEST(KvCacheQ8_0, AttentionIsSoftmaxOverTheQuantizedRows) {
  constexpr int kDim = 64, kPos = 37;
  KvCacheOptions o;
  o.n_ctx = kPos;
  o.type = DType::kQ8_0;
  KvCache cache(o, 1, kDim, kDim);
  std::vector<float> k(kDim), v(kDim), q(kDim);
  for (int p = 0; p < kPos; ++p) {
    for (int i = 0; i < kDim; ++i) {
      k[i] = std::sin(0.3f * i + p) * 2.0f;
      v[i] = std::cos(0.7f * i - 0.5f * p);
    }
    cache.Store(0, 0, p, k.data(), v.data());
  }
  for (int i = 0; i < kDim; ++i) q[i] = std::sin(1.1f * i) * 0.8f;
  const float scale = 0.125f;
  std::vector<float> scores(ScoresStride(kPos)), out(kDim);
  const CacheRows rows_k{cache.KRow(0, 0, 0), cache.k_row_bytes(), DType::kQ8_0};
  const CacheRows rows_v{cache.VRow(0, 0, 0), cache.v_row_bytes(), DType::kQ8_0};
  AttendOne(q.data(), kDim, rows_k, rows_v, kDim, kPos, scale, scores.data(), out.data());
  // Reference in double over the dequantized rows and the query rounded through Q8_0.
  std::vector<uint8_t> q8(RowBytes(DType::kQ8_0, kDim));
  std::vector<float> qd(kDim);
  kernels::QuantizeRow(DType::kQ8_0, q.data(), q8.data(), kDim);
  kernels::DequantizeRow(DType::kQ8_0, q8.data(), qd.data(), kDim);
  std::vector<double> s(kPos), want(kDim, 0.0);
  double m = -1e300, sum = 0.0;
  for (int p = 0; p < kPos; ++p) {
    cache.LoadK(0, 0, p, k.data());
    double dot = 0.0;
    for (int i = 0; i < kDim; ++i) dot += static_cast<double>(k[i]) * qd[i];
    s[p] = dot * scale;
    m = std::max(m, s[p]);
  }
  for (int p = 0; p < kPos; ++p) {
    const double w = std::exp(s[p] - m);
    sum += w;
    cache.LoadV(0, 0, p, v.data());
    for (int i = 0; i < kDim; ++i) want[i] += w * v[i];
  }
  for (int i = 0; i < kDim; ++i) EXPECT_NEAR(out[i], want[i] / sum, 1e-5) << i;
}

class KvQ8_0GoldenTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<float> Run(DType type) {
    KvCacheOptions o;
    o.n_ctx = 128;
    o.type = type;
    auto cache = loaded_.model->NewKvCache(o);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    // Fed as the goldens were: the prompt as one batch, then one token at a time.
    return RunChunks(*loaded_.model, ctx_, **cache, tokens_, golden_.prompt_ids.size(), 1);
  }

  void SetUp() override {
    golden_ = LoadGolden(GetParam());
    loaded_ = LoadModel(GetParam());
    ASSERT_NE(loaded_.model, nullptr);
    tokens_ = golden_.prompt_ids;
    tokens_.insert(tokens_.end(), golden_.greedy_ids.begin(), golden_.greedy_ids.end());
  }

  Golden golden_;
  Loaded loaded_;
  std::vector<int32_t> tokens_;
  ThreadPool pool_{1};
  Context ctx_{&pool_, nullptr};
};

// Built only into model_kv_q8_0_llamacpp_test (slow, tests/model/CMakeLists.txt says why).
#if defined(COHORT_KV_Q8_0_AGAINST_LLAMACPP)
TEST_P(KvQ8_0GoldenTest, MatchesLlamaCppWithAQ8_0Cache) {
  const std::string path = FixturePath("../kv-q8_0/" + std::string(GetParam()) + ".logits.f32");
  // The goldens come from a llama.cpp build (not part of cohort's build); until they are
  // committed this comparison cannot run, and says so.
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " missing: run tools/make-kv-q8_0-goldens.sh";
  const std::vector<float> want = ReadFloats(path);
  const std::vector<float> got = Run(DType::kQ8_0);
  const Diff d = Compare(got, want, golden_.n_vocab, kQuantRowTol);
  std::printf("[ golden ] %-20s q8_0 cache: max_abs %.3g, rows within %.0e: %d/%d, argmax agree %d/%d\n",
              GetParam(), d.max_abs, kQuantRowTol, d.rows_within, d.rows, d.argmax_agree, d.rows);
  EXPECT_LE(d.max_abs, kQuantMaxTol);
  EXPECT_GE(d.rows_within, static_cast<int>(std::ceil(kQuantRowsFraction * d.rows)));
  EXPECT_GE(d.argmax_agree, static_cast<int>(std::ceil(kQuantRowsFraction * d.rows)));
}

#endif

TEST_P(KvQ8_0GoldenTest, DiffersFromAnF32CacheOnlyByQuantization) {
  const std::vector<float> q8 = Run(DType::kQ8_0);
  const std::vector<float> f32 = Run(DType::kF32);
  const Diff d = Compare(q8, f32, golden_.n_vocab, kQuantRowTol);
  float peak = 0.0f;
  for (float x : f32) peak = std::max(peak, std::fabs(x));
  std::printf("[ q8_0 ] %-20s vs f32 cache: max_abs %.3g (logits up to %.3g), first row over %d, argmax agree %d/%d\n",
              GetParam(), d.max_abs, peak, d.first_row_over, d.argmax_agree, d.rows);
  EXPECT_GT(d.max_abs, 0.0f) << "the rows were not quantized";
  // 8-bit keys and values move these random-weight models' logits by up to 3-4% of the
  // largest (measured: 0.455 of 11.3, 0.452 of 10.7, 0.352 of 9.23); a wrong row or a lost
  // block scale moves them by far more.
  EXPECT_LE(d.max_abs, 0.05f * peak);
  EXPECT_GE(d.argmax_agree, static_cast<int>(std::ceil(kQuantRowsFraction * d.rows)));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, KvQ8_0GoldenTest,
                         ::testing::Values("tiny-llama-f32", "tiny-llama-q4_0", "tiny-qwen3-q8_0"),
                         FixtureParamName);

}  // namespace
}  // namespace cohort::model::testing
