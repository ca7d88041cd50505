// The ternary types TQ1_0 and TQ2_0: their GGUF geometry, hand-decoded blocks, ggml's quantizer
// reproducing llama-quantize's bytes on the fixtures' tensors, results pinned to llama.cpp's own
// x86 kernels on rows made by formula, the x86 and ARM orders close to ggml's generic sum, and
// every SIMD level equal to the scalar reference bit for bit (x86 and ARM orders, whichever this
// build runs), on quantized rows and on arbitrary block bytes, misaligned.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_tq.h"
#include "q8k_levels_check.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

constexpr DType kTernary[] = {DType::kTQ1_0, DType::kTQ2_0};

TEST(Ternary, GgufGeometryIsGgmls) {
  const auto tq1 = FindDType(34), tq2 = FindDType(35);
  ASSERT_TRUE(tq1.has_value());
  ASSERT_TRUE(tq2.has_value());
  EXPECT_EQ(tq1->type, DType::kTQ1_0);
  EXPECT_EQ(tq1->name, "tq1_0");
  EXPECT_EQ(tq1->block_size, 256);
  EXPECT_EQ(tq1->type_size, 54);  // 48 + 4 digit bytes, fp16 d
  EXPECT_EQ(tq2->type, DType::kTQ2_0);
  EXPECT_EQ(tq2->name, "tq2_0");
  EXPECT_EQ(tq2->block_size, 256);
  EXPECT_EQ(tq2->type_size, 66);  // 64 bytes of 2-bit digits, fp16 d
  for (DType type : kTernary) {
    EXPECT_TRUE(IsWeightType(type));
    EXPECT_EQ(VecDotType(type), DType::kQ8_K);
  }
  EXPECT_EQ(ParseDType("TQ1_0"), DType::kTQ1_0);
}

// Digits (2, 1, 0, 1, 2) = 194 in base 3, stored as ceil(194 * 256 / 243) = 205.
TEST(Ternary, Tq1ByteHoldsFiveBase3DigitsLeadingFirst) {
  const int want[5] = {2, 1, 0, 1, 2};
  for (int n = 0; n < 5; ++n) EXPECT_EQ(Tq1Trit(205, n), want[n]) << n;
  BlockTq1_0 b{};
  b.d = Fp32ToFp16(0.5f);
  std::memset(b.qs, 0x80, sizeof b.qs);  // 128 = ceil(121 * 256 / 243): every digit 1, value 0
  std::memset(b.qh, 0x80, sizeof b.qh);
  b.qs[3] = 205;   // values 3, 35, 67, 99, 131
  b.qs[32 + 5] = 205;  // values 165, 181, 197, 213, 229
  b.qh[2] = 205;   // values 242, 246, 250, 254 (the fifth digit is padding)
  std::vector<float> out(256);
  DequantizeRow(DType::kTQ1_0, &b, out.data(), 256);
  std::vector<float> want_row(256, 0.0f);
  for (int n = 0; n < 5; ++n) {
    want_row[3 + 32 * n] = 0.5f * static_cast<float>(want[n] - 1);
    want_row[165 + 16 * n] = 0.5f * static_cast<float>(want[n] - 1);
  }
  for (int n = 0; n < 4; ++n) want_row[242 + 4 * n] = 0.5f * static_cast<float>(want[n] - 1);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(out[j], want_row[j]) << j;
}

TEST(Ternary, Tq2ByteHoldsFourTwoBitDigitsLowFirst) {
  BlockTq2_0 b{};
  b.d = Fp32ToFp16(2.0f);
  std::memset(b.qs, 0x55, sizeof b.qs);  // every digit 1: value 0
  b.qs[7] = 0b10'01'00'10;   // values 7, 39, 71, 103: digits 2, 0, 1, 2
  b.qs[32 + 1] = 0b00'01'01'10;  // values 129, 161, 193, 225: digits 2, 1, 1, 0
  std::vector<float> out(256);
  DequantizeRow(DType::kTQ2_0, &b, out.data(), 256);
  std::vector<float> want(256, 0.0f);
  want[7] = 2, want[39] = -2, want[71] = 0, want[103] = 2;
  want[129] = 2, want[225] = -2;
  for (int j = 0; j < 256; ++j) EXPECT_EQ(out[j], want[j]) << j;
}

// Values already ternary (times a scale fp16 holds exactly) survive quantization unchanged.
TEST(Ternary, TernaryValuesRoundTripExactly) {
  std::mt19937 rng(7);
  const int64_t n = 256 * 3;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[i] = 0.375f * static_cast<float>(static_cast<int>(rng() % 3) - 1);
  x[5] = 0.375f;  // each block's max
  x[256 + 9] = -0.375f;
  x[512 + 255] = 0.375f;
  for (DType type : kTernary) {
    SCOPED_TRACE(DTypeName(type));
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(type, n)));
    QuantizeRow(type, x.data(), q.data(), n);
    EXPECT_EQ(testing::Dequantized(type, q.data(), n), x);
  }
}

TEST(Ternary, QuantizerReproducesLlamaQuantizeBytes) {
  const std::string dir = std::string(COHORT_TEST_DATA) + "/fixtures/models/";
  auto f32 = gguf::File::Open(dir + "tiny-llama-f32.gguf");
  ASSERT_TRUE(f32.ok());
  for (const char* type_name : {"tq1_0", "tq2_0"}) {
    auto q = gguf::File::Open(dir + "tiny-llama-" + type_name + ".gguf");
    ASSERT_TRUE(q.ok()) << type_name;
    int compared = 0;
    for (const gguf::TensorInfo& want : (*q)->tensors()) {
      if (want.ne.size() < 2) continue;  // the norms stay F32
      SCOPED_TRACE(std::string(type_name) + " " + want.name);
      const gguf::TensorInfo* src = (*f32)->FindTensor(want.name);
      ASSERT_NE(src, nullptr);
      ASSERT_EQ(DTypeName(want.type), type_name);
      const auto values = (*f32)->TensorData(*src);
      const auto want_bytes = (*q)->TensorData(want);
      std::vector<uint8_t> got(want_bytes.size());
      QuantizeRow(want.type, reinterpret_cast<const float*>(values.data()), got.data(), src->n_elements());
      EXPECT_EQ(0, std::memcmp(got.data(), want_bytes.data(), got.size()));
      ++compared;
    }
    EXPECT_EQ(compared, 16);  // every matrix, token_embd and output included (--pure)
  }
}

// Rows by formula (an LCG, no libm), as a C program linked against llama.cpp's AVX-512 build
// made them: quantize_row_tq{1,2}_0_ref, quantize_row_q8_K, then ggml_vec_dot_tq{1,2}_0_q8_K
// (x86) gave 0x41d512d0 for both types and the generic kernels 0x41d512c5 (fused by GCC);
// llama.cpp's bytes hash (h = 31 h + byte) to 921051365 (TQ1_0) and 3402108012 (TQ2_0).
struct FormulaRows {
  static constexpr int64_t kN = 256 * 5;
  std::vector<float> w = std::vector<float>(kN), a = std::vector<float>(kN);
  FormulaRows() {
    uint32_t state = 12345;
    for (int64_t i = 0; i < kN; ++i) {
      state = state * 1664525u + 1013904223u;
      w[i] = static_cast<float>(static_cast<int>((state >> 8) % 2001) - 1000) / 500.0f;
      state = state * 1664525u + 1013904223u;
      a[i] = static_cast<float>(static_cast<int>((state >> 8) % 2001) - 1000) /
             (100.0f + static_cast<float>(i / 256) * 700.0f);
    }
  }
};

uint32_t FloatBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

TEST(Ternary, X86OrderEqualsLlamaCppsKernelOnFormulaRows) {
  const FormulaRows rows;
  const int64_t n = FormulaRows::kN;
  std::vector<uint8_t> act(static_cast<size_t>(RowBytes(DType::kQ8_K, n)));
  QuantizeRow(DType::kQ8_K, rows.a.data(), act.data(), n);
  const struct {
    DType type;
    uint32_t bytes_hash;
  } kCases[] = {{DType::kTQ1_0, 921051365u}, {DType::kTQ2_0, 3402108012u}};
  for (const auto& c : kCases) {
    SCOPED_TRACE(DTypeName(c.type));
    std::vector<uint8_t> w(static_cast<size_t>(RowBytes(c.type, n)));
    QuantizeRow(c.type, rows.w.data(), w.data(), n);
    uint32_t hash = 0;
    for (uint8_t byte : w) hash = hash * 31 + byte;
    EXPECT_EQ(hash, c.bytes_hash);
    EXPECT_EQ(FloatBits(ref::GetTernaryX86OrderVecDot(c.type)(w.data(), act.data(), n)), 0x41d512d0u);
    // The generic order is another rounding of the same sum (and not llama.cpp's x86 result).
    const float generic = ref::GetTernaryVecDot(c.type)(w.data(), act.data(), n);
    EXPECT_NEAR(generic, 26.6341648f, 1e-4f);
    EXPECT_NE(FloatBits(generic), 0x41d512d0u);
#if defined(__x86_64__) || defined(__i386__)
    for (SimdLevel level : SupportedSimdLevels()) {
      SCOPED_TRACE(SimdLevelName(level));
      EXPECT_EQ(FloatBits(GetVecDot(c.type, level)(w.data(), act.data(), n)), 0x41d512d0u);
      EXPECT_EQ(FloatBits(GetVecDotGrouped(c.type, level)(w.data(), act.data(), n)), 0x41d512d0u);
    }
#endif
  }
}

// Rows of arbitrary bytes (for TQ2_0 the unused digit 3 too, which every order reads as +2)
// with a sane fp16 scale.
std::vector<uint8_t> RandomTernaryRow(DType type, int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t block_bytes = Traits(type).type_size;
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks * block_bytes));
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    const uint16_t d = Fp32ToFp16(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
    std::memcpy(row.data() + (i + 1) * block_bytes - 2, &d, 2);  // d is each block's last field
  }
  return row;
}

TEST(Ternary, EverySimdLevelEqualsScalarBitForBit) {
  for (DType type : kTernary) {
    // Both orders sum the exact integer block sums: reorderings of ggml's generic sum.
    testing::ExpectSimdLevelsEqualScalar(
        type, {ref::GetTernaryVecDot(type), {ref::GetTernaryX86OrderVecDot(type), ref::GetTernaryArmOrderVecDot(type)}},
        [type](int64_t n_blocks, uint32_t seed) { return RandomTernaryRow(type, n_blocks, seed); });
  }
}

// The scalar level runs llama.cpp's order of the build's ISA.
TEST(Ternary, ScalarLevelTakesTheIsasOrder) {
  for (DType type : kTernary) {
#if defined(__aarch64__)
    EXPECT_EQ(GetVecDot(type, SimdLevel::kScalar), ref::GetTernaryArmOrderVecDot(type));
#else
    EXPECT_EQ(GetVecDot(type, SimdLevel::kScalar), ref::GetTernaryX86OrderVecDot(type));
#endif
    EXPECT_EQ(GetVecDotGrouped(type, SimdLevel::kScalar), GetVecDot(type, SimdLevel::kScalar));
  }
}

}  // namespace
}  // namespace cohort::kernels
