// Golden tests: every fixture's 48 (stories260K: 69) teacher-forced logit rows must match
// llama.cpp's, fed as one batch and as prompt-then-one-token-at-a-time; F32 models must also
// reproduce llama.cpp's greedy continuation exactly, with an F32 and an F16 KV cache, and the
// quantized ones (bit-identical to llama.cpp when fed like the goldens) with an F32 cache.
#include <cstdio>

#include "golden_util.h"
#include "kernels/quant.h"

namespace cohort::model::testing {
namespace {

// On x86 every level, scalar included, sums in llama.cpp's x86 order (quant_ref_x86.cc), so
// the quantized goldens are met to the bit; the NEON kernels follow their own order.
#if defined(__x86_64__) || defined(__i386__)
constexpr bool kClaimsBitExact = true;
#else
constexpr bool kClaimsBitExact = false;
#endif

struct FixtureCase {
  const char* name;
  bool quantized;
};

void PrintTo(const FixtureCase& c, std::ostream* os) { *os << c.name; }

constexpr float kF32Tol = 1e-4f;       // README: llama.cpp's own F32 paths differ by 1e-5
// The criterion for the quantized fixtures: max abs <= 0.3 and >= 90% of rows within
// 1e-3 (README: activation-quantization flips reach 0.07-0.2).
constexpr float kQuantMaxTol = 0.3f;
constexpr float kQuantRowTol = 1e-3f;
constexpr double kQuantRowsFraction = 0.9;
constexpr int kQuantMinCleanRows = 4;

class GoldenTest : public ::testing::TestWithParam<FixtureCase> {
 protected:
  void SetUp() override {
    golden_ = LoadGolden(GetParam().name);
    loaded_ = LoadModel(GetParam().name);
    ASSERT_NE(loaded_.model, nullptr);
    ASSERT_EQ(loaded_.model->config().n_vocab, golden_.n_vocab);
    tokens_ = golden_.prompt_ids;
    tokens_.insert(tokens_.end(), golden_.greedy_ids.begin(), golden_.greedy_ids.end());
  }

  std::unique_ptr<KvCache> NewCache(DType type = DType::kF32) {
    KvCacheOptions o;
    o.n_ctx = 128;
    o.type = type;
    auto cache = loaded_.model->NewKvCache(o);
    EXPECT_TRUE(cache.ok()) << cache.status().ToString();
    return std::move(*cache);
  }

  // as_goldens: fed as llama.cpp fed the goldens (the prompt as one batch, then one token per
  // decode), so its CPU backend took the same code paths (repacked GEMM vs GEMV, sgemm vs
  // vec_dot in attention) that cohort mirrors for each batch shape. `want`: llama.cpp's rows
  // for that feeding, the goldens' by default.
  void CheckLogits(const std::vector<float>& got, const char* how, bool as_goldens,
                   const std::vector<float>* want = nullptr) {
    const bool quantized = GetParam().quantized;
    const Diff d =
        Compare(got, want ? *want : golden_.logits, golden_.n_vocab, quantized ? kQuantRowTol : kF32Tol);
    std::printf("[ golden ] %-20s %-16s max_abs %.3g, rows within %.0e: %d/%d (first over: %d, "
                "max before it %.3g), argmax agree %d/%d\n",
                GetParam().name, how, d.max_abs, quantized ? kQuantRowTol : kF32Tol,
                d.rows_within, d.rows, d.first_row_over, d.max_before_first_over, d.argmax_agree,
                d.rows);
    if (!quantized) {
      EXPECT_LE(d.max_abs, kF32Tol);
      EXPECT_EQ(d.argmax_agree, d.rows);
      return;
    }
    EXPECT_LE(d.max_abs, kQuantMaxTol);
    if (as_goldens) {
      // The criterion. Beyond it: cohort reproduces ggml's activation quantization and
      // every float sum of these graphs in ggml's order (AVX-512 build; cohort's x86 levels,
      // the scalar one included, compute the same bits), so on x86 the logits are identical.
      EXPECT_GE(d.rows_within, static_cast<int>(std::ceil(kQuantRowsFraction * d.rows)));
      if (kClaimsBitExact) {
        EXPECT_EQ(d.max_abs, 0.0f) << "no longer bit-identical to llama.cpp's CPU backend";
      }
      return;
    }
    // Other batch shapes: llama.cpp itself sums some products in another order for them (Q4_K's
    // repacked GEMM takes full groups of 4 tokens, GEMV the rest; attention values go through
    // sgemm for batches of >= 2 tokens), so one-step rounding flips of the activation
    // quantization (README) can occur where the goldens' shapes had none: agreement to 1e-5 up
    // to the first divergence, not in the first rows, then a bounded difference and the same
    // argmax in >= 90% of rows.
    EXPECT_LE(d.max_before_first_over, 1e-5f);
    EXPECT_TRUE(d.first_row_over < 0 || d.first_row_over >= kQuantMinCleanRows) << d.first_row_over;
    EXPECT_GE(d.argmax_agree, static_cast<int>(std::ceil(kQuantRowsFraction * d.rows)));
  }

  Golden golden_;
  Loaded loaded_;
  std::vector<int32_t> tokens_;
  ThreadPool pool_{1};  // threads do not change results (MultiSeqTest checks); one is fastest here
  Context ctx_{&pool_, nullptr};
};

TEST_P(GoldenTest, OneBatchMatchesLlamaCpp) {
  auto cache = NewCache();
  CheckLogits(RunChunks(*loaded_.model, ctx_, *cache, tokens_, tokens_.size(), 1), "one batch",
              /*as_goldens=*/false);
}

TEST_P(GoldenTest, PromptThenTokenByTokenMatchesLlamaCpp) {
  auto cache = NewCache();
  CheckLogits(RunChunks(*loaded_.model, ctx_, *cache, tokens_, golden_.prompt_ids.size(), 1),
              "token by token", /*as_goldens=*/true);
}

TEST_P(GoldenTest, UnevenChunksMatchLlamaCpp) {
  auto cache = NewCache();
  const std::vector<float> got = RunChunks(*loaded_.model, ctx_, *cache, tokens_, 3, 7);
  // Where the fixture maker recorded llama.cpp's own rows for this feeding
  // (make-quant-fixtures.sh), they are the reference, met as the goldens are: llama.cpp took the
  // paths cohort takes. (IQ3_S's leave the goldens' by 0.05 from row 3 on: batches of < 8 take
  // the vec-dot, with x86's sign wrap, where the goldens' 16-id prompt took the panel GEMM.)
  // They are x86's rows: llama.cpp's NEON kernels have no sign wrap, so aarch64 builds check
  // against the goldens as for every other fixture.
  const std::string own = FixturePath("golden/" + std::string(GetParam().name) + ".chunks_3_7.f32");
  if (kClaimsBitExact && std::ifstream(own).good()) {
    const std::vector<float> want = ReadFloats(own);
    ASSERT_EQ(want.size(), got.size());
    CheckLogits(got, "chunks 3+7 (own)", /*as_goldens=*/true, &want);
    return;
  }
  CheckLogits(got, "chunks 3+7", /*as_goldens=*/false);
}

// The decode-row criterion: the rows made token by token after the prompt (llama.cpp's
// gen_logits) match the goldens to <= 1e-3 at 1, 2 and 3 threads, so splitting a matmul's rows
// over threads changes no sum (llama.cpp's -t 1/2/3 give those same rows).
constexpr float kDecodeRowTol = 1e-3f;

TEST_P(GoldenTest, DecodeRowsMatchLlamaCppAtOneTwoAndThreeThreads) {
  const int64_t n_prompt = static_cast<int64_t>(golden_.prompt_ids.size());
  const std::vector<float> want(golden_.logits.begin() + n_prompt * golden_.n_vocab, golden_.logits.end());
  // The goldens come from llama.cpp's x86 build: elsewhere (NEON's own order) a quantized
  // fixture is held to the quantized tolerance, and the thread counts to each other, exactly.
  const float tol = kClaimsBitExact || !GetParam().quantized ? kDecodeRowTol : kQuantMaxTol;
  std::vector<float> one_thread;
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << threads << " threads");
    ThreadPool pool(threads);
    Context ctx{&pool, nullptr};
    auto cache = NewCache();
    const std::vector<float> all = RunChunks(*loaded_.model, ctx, *cache, tokens_, n_prompt, 1);
    ASSERT_EQ(all.size(), golden_.logits.size());
    const std::vector<float> got(all.begin() + n_prompt * golden_.n_vocab, all.end());
    const Diff d = Compare(got, want, golden_.n_vocab, kDecodeRowTol);
    std::printf("[ golden ] %-20s decode rows, %d threads: max_abs %.3g\n", GetParam().name, threads, d.max_abs);
    EXPECT_LE(d.max_abs, tol);
    if (threads == 1) one_thread = got;
    EXPECT_EQ(got, one_thread) << "rows differ from one thread's";
  }
}

// README: exact greedy ids are required of F32 models only (quantized ones would need a
// bit-faithful ggml port), so this suite is instantiated with the F32 fixtures.
class GreedyTest : public GoldenTest {};

TEST_P(GreedyTest, GreedyDecodeReproducesGreedyIds) {
  auto cache = NewCache();
  EXPECT_EQ(GreedyDecode(*loaded_.model, ctx_, *cache, golden_.prompt_ids, golden_.greedy_ids.size()),
            golden_.greedy_ids);
}

TEST_P(GreedyTest, F16KvCacheKeepsGreedyIds) {
  auto cache = NewCache(DType::kF16);
  EXPECT_EQ(GreedyDecode(*loaded_.model, ctx_, *cache, golden_.prompt_ids, golden_.greedy_ids.size()),
            golden_.greedy_ids);
  // README: llama.cpp's own F16-KV runs differ by 0.005-0.03 from the F32 goldens.
  auto cache2 = NewCache(DType::kF16);
  const Diff d = Compare(RunChunks(*loaded_.model, ctx_, *cache2, tokens_, tokens_.size(), 1),
                         golden_.logits, golden_.n_vocab, 0.05f);
  std::printf("[ golden ] %-20s f16 kv cache     max_abs %.3g\n", GetParam().name, d.max_abs);
  EXPECT_LE(d.max_abs, 0.05f);
}

// Fed like the goldens, cohort's quantized logits are llama.cpp's to the bit on x86 with AVX2
// (see CheckLogits), so its own greedy loop must also reproduce the continuation exactly.
class QuantizedGreedyTest : public GoldenTest {};

TEST_P(QuantizedGreedyTest, GreedyDecodeReproducesGreedyIds) {
  if (!kClaimsBitExact) {
    GTEST_SKIP() << "bit-exact agreement is claimed for cohort's x86 levels only";
  }
  auto cache = NewCache();
  EXPECT_EQ(GreedyDecode(*loaded_.model, ctx_, *cache, golden_.prompt_ids, golden_.greedy_ids.size()),
            golden_.greedy_ids);
}

std::string CaseName(const ::testing::TestParamInfo<FixtureCase>& info) {
  std::string n = info.param.name;
  for (char& ch : n) {
    if (ch == '-' || ch == '.') ch = '_';
  }
  return n;
}

const FixtureCase kF32Cases[] = {{"tiny-llama-f32", false},    {"tiny-qwen2-f32", false},
                                 {"tiny-qwen3-f32", false},    {"tiny-qwen3moe-f32", false},
                                 {"tiny-deepseek2-f32", false}, {"stories260K", false}};

INSTANTIATE_TEST_SUITE_P(F32, GreedyTest, ::testing::ValuesIn(kF32Cases), CaseName);
INSTANTIATE_TEST_SUITE_P(F32, GoldenTest, ::testing::ValuesIn(kF32Cases), CaseName);
const FixtureCase kQuantizedCases[] = {
    {"tiny-llama-q8_0", true}, {"tiny-llama-q4_0", true}, {"tiny-llama-q6_k", true},
    {"tiny-llama-q4_k_m", true}, {"tiny-qwen3-q8_0", true}, {"tiny-qwen3-q4_0", true},
    {"tiny-qwen3-q6_k", true}, {"tiny-qwen3-q4_k_m", true},
    // The i-quants and the ternary types (tools/make-quant-fixtures.sh: llama-quantize --pure,
    // AVX-512 llama.cpp), one a line.
    {"tiny-llama-iq4_nl", true},
    {"tiny-llama-iq4_xs", true},
    {"tiny-llama-iq2_xxs", true},
    {"tiny-llama-iq2_xs", true},
    {"tiny-llama-iq2_s", true},
    {"tiny-llama-iq3_xxs", true},
    {"tiny-llama-iq3_s", true},
    {"tiny-llama-iq1_s", true},
    {"tiny-llama-iq1_m", true},
    {"tiny-llama-tq1_0", true},
    {"tiny-llama-tq2_0", true},
    // IQ4_NL and IQ4_XS quantized against tiny-llama-f32's importance matrix (--imatrix).
    {"tiny-llama-iq4_nl_imat", true},
    {"tiny-llama-iq4_xs_imat", true},
};

INSTANTIATE_TEST_SUITE_P(Quantized, GoldenTest, ::testing::ValuesIn(kQuantizedCases), CaseName);
INSTANTIATE_TEST_SUITE_P(Quantized, QuantizedGreedyTest, ::testing::ValuesIn(kQuantizedCases),
                         CaseName);

}  // namespace
}  // namespace cohort::model::testing
