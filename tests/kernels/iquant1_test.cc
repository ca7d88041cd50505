// IQ1_S and IQ1_M: the grid's shape, hand-decoded blocks (index high bits, scales, the delta and
// IQ1_M's spread super scale), x86's 8-bit sign move in its single-token order against true
// products in the panel, ARM and generic orders, the dequantized rows agreeing with the dot
// products, the quantizer's blocks valid and near their input, llama-quantize's tensors
// dequantizing near their F32 originals, and every SIMD level equal to the scalar reference bit
// for bit in both orders, on quantized rows and on arbitrary block bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "kernels/iq1_grids.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "q8k_levels_check.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

TEST(IQuant1, GridHoldsDistinctTernaryPoints) {
  std::set<uint64_t> seen;
  for (uint64_t entry : kIq1sGrid) {
    for (int j = 0; j < 8; ++j) {
      const int v = static_cast<int8_t>((entry >> (8 * j)) & 0xff);
      EXPECT_TRUE(v == -1 || v == 0 || v == 1) << std::hex << entry;
    }
    seen.insert(entry);
  }
  EXPECT_EQ(seen.size(), 2048u);
  EXPECT_EQ(kIq1sGrid[0], 0xffffffffffffffffull);     // all -1
  EXPECT_EQ(kIq1sGrid[2047], 0x0101010101010101ull);  // all +1
}

TEST(IQuant1, TypesAreKnownWithTheirBlockGeometry) {
  EXPECT_EQ(ParseDType("IQ1_S"), DType::kIQ1_S);
  EXPECT_EQ(ParseDType("iq1_m"), DType::kIQ1_M);
  EXPECT_EQ(static_cast<int>(DType::kIQ1_S), 19);
  EXPECT_EQ(static_cast<int>(DType::kIQ1_M), 29);
  EXPECT_EQ(RowBytes(DType::kIQ1_S, 512), 100);
  EXPECT_EQ(RowBytes(DType::kIQ1_M, 512), 112);
  EXPECT_TRUE(IsWeightType(DType::kIQ1_S));
  EXPECT_TRUE(IsWeightType(DType::kIQ1_M));
  EXPECT_EQ(VecDotType(DType::kIQ1_S), DType::kQ8_K);
  EXPECT_EQ(VecDotType(DType::kIQ1_M), DType::kQ8_K);
  // llama.cpp's x86 panel GEMM takes whole batches of 8 tokens and more.
  EXPECT_EQ(GroupedTokens(DType::kIQ1_S, 7), 0);
  EXPECT_EQ(GroupedTokens(DType::kIQ1_M, 9), 9);
}

TEST(IQuant1, Iq1SBlockDecodesToScaleTimesGridPlusDelta) {
  BlockIq1S b{};
  b.d = Fp32ToFp16(1.0f);
  // Sub-block 0: group 0 entry 1 (+1, then seven -1), group 1 entry 2047 (index 0xff with high
  // bits 7), ls 2 (scale 5), delta +1/8.
  b.qs[0] = 1;
  b.qs[1] = 0xff;
  b.qh[0] = static_cast<uint16_t>(7 << 3 | 2 << 12);
  // Sub-block 1: entry 0 everywhere (all -1), ls 0 (scale 1), delta -1/8.
  b.qh[1] = 0x8000;
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ1_S, &b, out.data(), 256);
  EXPECT_EQ(out[0], 5.625f);   // 5 * (1 + 1/8)
  EXPECT_EQ(out[1], -4.375f);  // 5 * (-1 + 1/8)
  EXPECT_EQ(out[8], 5.625f);   // entry 2047: +1
  EXPECT_EQ(out[15], 5.625f);
  EXPECT_EQ(out[16], -4.375f);  // groups 2, 3: entry 0
  EXPECT_EQ(out[32], -1.125f);  // 1 * (-1 - 1/8)
  EXPECT_EQ(out[63], -1.125f);
}

// d = 1: fp16 0x3c00, nibble w of it in the top of scale word w.
void SetIq1MSuperScaleOne(BlockIq1M* b) {
  const uint16_t bits = Fp32ToFp16(1.0f);
  for (int w = 0; w < 4; ++w) {
    uint16_t word = Iq1MScaleWord(*b, w);
    word = static_cast<uint16_t>((word & 0x0fff) | ((bits >> (4 * w)) & 0xf) << 12);
    std::memcpy(b->scales + 2 * w, &word, 2);
  }
}

TEST(IQuant1, Iq1MBlockDecodesWithScalesPerHalfAndDeltasPerGroup) {
  BlockIq1M b{};
  // Scale word 0: sub-block 0 halves ls 1 and 3 (scales 3 and 7), sub-block 1 halves ls 7, 0.
  const uint16_t word0 = 1 | 3 << 3 | 7 << 6 | 0 << 9;
  std::memcpy(b.scales, &word0, 2);
  SetIq1MSuperScaleOne(&b);
  EXPECT_EQ(Iq1MSuperScale(b), Fp32ToFp16(1.0f));
  // Sub-block 0: group 0 entry 2047 (qs 0xff, high bits 7 in qh[0]'s low nibble), delta -1/8;
  // group 1 entry 1, delta +; groups 2, 3 entry 0, group 3's delta -.
  b.qs[0] = 0xff;
  b.qs[1] = 1;
  b.qh[0] = 0x7 | 0x8;
  b.qh[1] = 0x80;
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ1_M, &b, out.data(), 256);
  EXPECT_EQ(out[0], 2.625f);     // half 0, scale 3: 3 * (1 - 1/8)
  EXPECT_EQ(out[7], 2.625f);
  EXPECT_EQ(out[8], 3.375f);     // 3 * (1 + 1/8)
  EXPECT_EQ(out[9], -2.625f);    // 3 * (-1 + 1/8)
  EXPECT_EQ(out[16], -6.125f);   // half 1, scale 7: 7 * (-1 + 1/8)
  EXPECT_EQ(out[24], -7.875f);   // group 3: 7 * (-1 - 1/8)
  EXPECT_EQ(out[32], -13.125f);  // sub-block 1, half 0, scale 15: 15 * (-1 + 1/8)
  EXPECT_EQ(out[48], -0.875f);   // half 1, scale 1
}

// Weight value -1 at position 0 against a Q8_K row whose first value is -128, scale 1, d = 1:
// x86's single-token kernels move the sign onto the activation in 8 bits, where -(-128) wraps.
BlockQ8_K OneActivation(int8_t q) {
  BlockQ8_K a{};
  a.d = 1.0f;
  a.qs[0] = q;
  a.bsums[0] = q;
  return a;
}

TEST(IQuant1, Iq1SSingleTokenX86OrderKeepsSignWrap) {
  BlockIq1S w{};  // entry 0 (all -1) everywhere, ls 0, delta +1/8
  w.d = Fp32ToFp16(1.0f);
  const BlockQ8_K a = OneActivation(-128);
  // True: grid part (-1)(-128) = 128, delta part (+1/8)(-128) = -16.
  EXPECT_EQ(ref::GetIq1VecDot(DType::kIQ1_S)(&w, &a, 256), 112.0f);
  EXPECT_EQ(ref::GetIq1X86OrderVecDot(DType::kIQ1_S)(&w, &a, 256), -144.0f);  // the grid part wraps
  EXPECT_EQ(ref::GetIq1X86OrderVecDotGrouped(DType::kIQ1_S)(&w, &a, 256), 112.0f);
  EXPECT_EQ(ref::GetIq1ArmOrderVecDot(DType::kIQ1_S)(&w, &a, 256), 112.0f);
#if defined(__x86_64__) || defined(__i386__)
  for (SimdLevel level : SupportedSimdLevels()) {
    SCOPED_TRACE(SimdLevelName(level));
    EXPECT_EQ(GetVecDot(DType::kIQ1_S, level)(&w, &a, 256), -144.0f);
    EXPECT_EQ(GetVecDotGrouped(DType::kIQ1_S, level)(&w, &a, 256), 112.0f);
  }
#endif
}

TEST(IQuant1, Iq1MSingleTokenX86OrderWrapsTheDeltaToo) {
  BlockIq1M w{};  // entry 0 everywhere, scales 1
  SetIq1MSuperScaleOne(&w);
  w.qh[0] = 0x8;  // group 0's delta -1/8
  const BlockQ8_K a = OneActivation(-128);
  // True: grid 128, delta (-1/8)(-128) = 16; x86 wraps both products to -128.
  EXPECT_EQ(ref::GetIq1VecDot(DType::kIQ1_M)(&w, &a, 256), 144.0f);
  EXPECT_EQ(ref::GetIq1X86OrderVecDot(DType::kIQ1_M)(&w, &a, 256), -144.0f);
  EXPECT_EQ(ref::GetIq1X86OrderVecDotGrouped(DType::kIQ1_M)(&w, &a, 256), 144.0f);
  EXPECT_EQ(ref::GetIq1ArmOrderVecDot(DType::kIQ1_M)(&w, &a, 256), 144.0f);
#if defined(__x86_64__) || defined(__i386__)
  for (SimdLevel level : SupportedSimdLevels()) {
    SCOPED_TRACE(SimdLevelName(level));
    EXPECT_EQ(GetVecDot(DType::kIQ1_M, level)(&w, &a, 256), -144.0f);
    EXPECT_EQ(GetVecDotGrouped(DType::kIQ1_M, level)(&w, &a, 256), 144.0f);
  }
#endif
}

TEST(IQuant1, QuantizerIsNearItsInput) {
  for (DType type : {DType::kIQ1_S, DType::kIQ1_M}) {
    SCOPED_TRACE(std::string(DTypeName(type)));
    const int64_t n = 256 * 8;
    const std::vector<float> x = testing::RandomRow(n, 11);
    std::vector<uint8_t> q(static_cast<size_t>(RowBytes(type, n)));
    QuantizeRow(type, x.data(), q.data(), n);
    const std::vector<float> back = testing::Dequantized(type, q.data(), n);
    double err = 0, norm = 0, dot = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (back[i] - x[i]) * (back[i] - x[i]);
      norm += x[i] * x[i];
      dot += back[i] * x[i];
    }
    // A 1-bit code of Gaussian values: correlated with its input, far from exact.
    EXPECT_LT(std::sqrt(err / norm), 0.6);  // 0.53 (IQ1_S) and 0.52 (IQ1_M) measured
    EXPECT_GT(dot / norm, 0.65);            // 0.76 measured
    EXPECT_GT(err, 0.0);
  }
}

// llama-quantize's IQ1 tensors (the fixtures, its importance-weighted search) dequantize near
// the F32 weights they came from: the grid, the index bits, scales, deltas and super scales are
// read as ggml wrote them (a misread one leaves values uncorrelated with their originals).
std::vector<float> FixtureTensor(const std::string& model, const char* tensor, DType type) {
  auto file = gguf::File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/" + model + ".gguf");
  EXPECT_TRUE(file.ok()) << model;
  if (!file.ok()) return {};
  const gguf::TensorInfo* info = (*file)->FindTensor(tensor);
  EXPECT_NE(info, nullptr) << tensor;
  if (info == nullptr) return {};
  EXPECT_EQ(info->type, type) << model << " " << tensor;
  const auto bytes = (*file)->TensorData(*info);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), RowBytes(info->type, info->n_elements()));
  return testing::Dequantized(info->type, bytes.data(), info->n_elements());
}

TEST(IQuant1, LlamaQuantizeTensorsDequantizeNearTheirF32Values) {
  for (const char* tensor : {"blk.0.ffn_gate.weight", "blk.1.attn_q.weight", "blk.1.ffn_down.weight"}) {
    const std::vector<float> f32 = FixtureTensor("tiny-llama-f32", tensor, DType::kF32);
    for (DType type : {DType::kIQ1_S, DType::kIQ1_M}) {
      SCOPED_TRACE(::testing::Message() << tensor << " " << DTypeName(type));
      const std::vector<float> q = FixtureTensor("tiny-llama-" + std::string(DTypeName(type)), tensor, type);
      ASSERT_EQ(q.size(), f32.size());
      double err = 0, norm = 0, dot = 0;
      for (size_t i = 0; i < q.size(); ++i) {
        err += (q[i] - f32[i]) * static_cast<double>(q[i] - f32[i]);
        norm += f32[i] * static_cast<double>(f32[i]);
        dot += q[i] * static_cast<double>(f32[i]);
      }
      EXPECT_LT(std::sqrt(err / norm), 0.55);  // 0.46 to 0.50 measured
      EXPECT_GT(dot / norm, 0.85);             // 0.94 to 0.96
    }
  }
}

// Rows of arbitrary bytes (every grid entry, scale and delta) with a sane fp16 super scale.
std::vector<uint8_t> RandomRow(DType type, int64_t n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t block_bytes = static_cast<size_t>(Traits(type).type_size);
  std::vector<uint8_t> row(static_cast<size_t>(n_blocks) * block_bytes);
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  for (int64_t i = 0; i < n_blocks; ++i) {
    uint8_t* block = row.data() + i * block_bytes;
    const uint16_t d = Fp32ToFp16(std::uniform_real_distribution<float>(-0.05f, 0.05f)(rng));
    if (type == DType::kIQ1_S) {
      std::memcpy(block, &d, 2);
    } else {
      auto* b = reinterpret_cast<BlockIq1M*>(block);
      for (int w = 0; w < 4; ++w) {
        b->scales[2 * w + 1] = static_cast<uint8_t>((b->scales[2 * w + 1] & 0x0f) | ((d >> (4 * w)) & 0xf) << 4);
      }
    }
  }
  return row;
}

TEST(IQuant1, EverySimdLevelEqualsScalarBitForBit) {
  for (DType type : {DType::kIQ1_S, DType::kIQ1_M}) {
    testing::ExpectSimdLevelsEqualScalar(
        type, {ref::GetIq1VecDot(type), {ref::GetIq1X86OrderVecDotGrouped(type), ref::GetIq1ArmOrderVecDot(type)}},
        [type](int64_t n_blocks, uint32_t seed) { return RandomRow(type, n_blocks, seed); });
  }
}

}  // namespace
}  // namespace cohort::kernels
