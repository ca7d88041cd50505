// Scalar reference kernels for the plain types (F32, F16, BF16) and ggml's legacy 32-element
// block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1): quantize, dequantize and vec-dot, with
// the same float formulas as ggml so results agree bit for bit where ggml's are defined.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// ---- plain types ----

void ConvertToFloat(DType type, const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint8_t*>(src);
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, h + 2 * i, 2);
    dst[i] = type == DType::kF16 ? Fp16ToFp32(bits) : Bf16ToFp32(bits);
  }
}

void ConvertFromFloat(DType type, const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = type == DType::kF16 ? Fp32ToFp16(src[i]) : Fp32ToBf16(src[i]);
    std::memcpy(h + 2 * i, &bits, 2);
  }
}

// ggml's scalar dot products of plain types accumulate in double.
float VecDotF32(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    float x, y;
    std::memcpy(&x, wb + 4 * i, 4);
    std::memcpy(&y, ab + 4 * i, 4);
    sum += static_cast<double>(x * y);
  }
  return static_cast<float>(sum);
}

template <float (*kToFloat)(uint16_t)>
float VecDotHalf(const void* w, const void* a, int64_t n) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* ab = static_cast<const uint8_t*>(a);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t x, y;
    std::memcpy(&x, wb + 2 * i, 2);
    std::memcpy(&y, ab + 2 * i, 2);
    sum += static_cast<double>(kToFloat(x) * kToFloat(y));
  }
  return static_cast<float>(sum);
}

// ---- quantizers ----

// Q4_0 / Q5_0: d = (signed value of largest magnitude) / -2^(bits-1), truncating rounding
// with a +0.5 offset, as quantize_row_q4_0_ref / q5_0_ref.
template <typename Block, int kBits>
void QuantizeSymmetric(const float* x, Block* y, int64_t nb) {
  constexpr int kHalf = 1 << (kBits - 1);
  constexpr int kMax = (1 << kBits) - 1;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0, max = 0;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -kHalf;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t q0 = std::min<int>(kMax, static_cast<int8_t>(x[j] * id + (kHalf + 0.5f)));
      const uint8_t q1 =
          std::min<int>(kMax, static_cast<int8_t>(x[j + kQK / 2] * id + (kHalf + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK / 2);
    }
    if constexpr (kBits == 5) std::memcpy(y[i].qh, &qh, 4);
  }
}

// Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min, as quantize_row_q4_1_ref / q5_1_ref.
template <typename Block, int kBits>
void QuantizeAffine(const float* x, Block* y, int64_t nb) {
  constexpr int kMax = (1 << kBits) - 1;
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < kQK; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / kMax;
    const float id = d != 0 ? 1.0f / d : 0.0f;
    y[i].d = Fp32ToFp16(d);
    y[i].m = Fp32ToFp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      // ggml clamps the 4-bit case at 15 but not the 5-bit one; the clamp is a no-op there.
      const uint8_t q0 = std::min<int>(kMax, static_cast<uint8_t>((x[j] - min) * id + 0.5f));
      const uint8_t q1 =
          std::min<int>(kMax, static_cast<uint8_t>((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0f) | ((q1 & 0x0f) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + kQK / 2);
    }
    if constexpr (kBits == 5) std::memcpy(y[i].qh, &qh, 4);
  }
}

// Q8_0 / Q8_1 exactly as ggml's x86 quantize_row_q8_0/q8_1 (the activation path): the
// multiplier is 127/amax (not 1/fp16(d)) and rounding is to nearest, ties to even.
template <typename Block>
void QuantizeQ8(const float* x, Block* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    float amax = 0;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    y[i].d = Fp32ToFp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(NearestInt(x[j] * id));
      sum += y[i].qs[j];
    }
    if constexpr (sizeof(Block) == sizeof(BlockQ8_1)) {
      y[i].s = Fp32ToFp16(d * static_cast<float>(sum));
    }
  }
}

// ---- quant values of one block, shared by dequantize and vec-dot ----

inline int Nibble(const uint8_t* qs, int j) {
  return j < kQK / 2 ? (qs[j] & 0x0f) : (qs[j - kQK / 2] >> 4);
}
inline int HighBit(const uint8_t qh[4], int j) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return static_cast<int>((bits >> j) & 1u) << 4;
}

// Element j of a block as (integer quant, uses min) for each type.
inline int QuantOf(const BlockQ4_0& b, int j) { return Nibble(b.qs, j) - 8; }
inline int QuantOf(const BlockQ4_1& b, int j) { return Nibble(b.qs, j); }
inline int QuantOf(const BlockQ5_0& b, int j) { return (Nibble(b.qs, j) | HighBit(b.qh, j)) - 16; }
inline int QuantOf(const BlockQ5_1& b, int j) { return Nibble(b.qs, j) | HighBit(b.qh, j); }
inline int QuantOf(const BlockQ8_0& b, int j) { return b.qs[j]; }
inline int QuantOf(const BlockQ8_1& b, int j) { return b.qs[j]; }

template <typename Block>
constexpr bool kHasMin = requires(Block b) { b.m; };

template <typename Block>
void Dequantize(const void* src, float* y, int64_t nb) {
  const auto* x = static_cast<const Block*>(src);
  for (int64_t i = 0; i < nb; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int j = 0; j < kQK; ++j) {
      if constexpr (kHasMin<Block>) {
        y[i * kQK + j] = QuantOf(x[i], j) * d + Fp16ToFp32(x[i].m);
      } else {
        y[i * kQK + j] = QuantOf(x[i], j) * d;
      }
    }
  }
}

// sumf += d_w * d_a * isum (+ m_w * s_a for the types with a minimum), block by block.
template <typename WBlock, typename ABlock>
float VecDotBlocks(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const WBlock*>(w);
  const auto* y = static_cast<const ABlock*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int isum = 0;
    for (int j = 0; j < kQK; ++j) isum += QuantOf(x[i], j) * y[i].qs[j];
    if constexpr (kHasMin<WBlock>) {
      sumf += (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d)) * static_cast<float>(isum) +
              Fp16ToFp32(x[i].m) * Fp16ToFp32(y[i].s);
    } else {
      sumf += static_cast<float>(isum) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
    }
  }
  return sumf;
}

}  // namespace

void DequantizeLegacyRow(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case DType::kF16:
    case DType::kBF16: ConvertToFloat(type, src, dst, n); return;
    case DType::kQ4_0: Dequantize<BlockQ4_0>(src, dst, n / kQK); return;
    case DType::kQ4_1: Dequantize<BlockQ4_1>(src, dst, n / kQK); return;
    case DType::kQ5_0: Dequantize<BlockQ5_0>(src, dst, n / kQK); return;
    case DType::kQ5_1: Dequantize<BlockQ5_1>(src, dst, n / kQK); return;
    case DType::kQ8_0: Dequantize<BlockQ8_0>(src, dst, n / kQK); return;
    case DType::kQ8_1: Dequantize<BlockQ8_1>(src, dst, n / kQK); return;
    default: COHORT_CHECK(false && "not a legacy row type");
  }
}

void QuantizeLegacyRow(DType type, const float* x, void* dst, int64_t n) {
  const int64_t nb = n / kQK;
  switch (type) {
    case DType::kF32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); return;
    case DType::kF16:
    case DType::kBF16: ConvertFromFloat(type, x, dst, n); return;
    case DType::kQ4_0: QuantizeSymmetric<BlockQ4_0, 4>(x, static_cast<BlockQ4_0*>(dst), nb); return;
    case DType::kQ5_0: QuantizeSymmetric<BlockQ5_0, 5>(x, static_cast<BlockQ5_0*>(dst), nb); return;
    case DType::kQ4_1: QuantizeAffine<BlockQ4_1, 4>(x, static_cast<BlockQ4_1*>(dst), nb); return;
    case DType::kQ5_1: QuantizeAffine<BlockQ5_1, 5>(x, static_cast<BlockQ5_1*>(dst), nb); return;
    case DType::kQ8_0: QuantizeQ8(x, static_cast<BlockQ8_0*>(dst), nb); return;
    case DType::kQ8_1: QuantizeQ8(x, static_cast<BlockQ8_1*>(dst), nb); return;
    default: COHORT_CHECK(false && "not a legacy row type");
  }
}

VecDotFn GetLegacyVecDot(DType weight) {
  switch (weight) {
    case DType::kF32: return VecDotF32;
    case DType::kF16: return VecDotHalf<Fp16ToFp32>;
    case DType::kBF16: return VecDotHalf<Bf16ToFp32>;
    case DType::kQ4_0: return VecDotBlocks<BlockQ4_0, BlockQ8_0>;
    case DType::kQ4_1: return VecDotBlocks<BlockQ4_1, BlockQ8_1>;
    case DType::kQ5_0: return VecDotBlocks<BlockQ5_0, BlockQ8_0>;
    case DType::kQ5_1: return VecDotBlocks<BlockQ5_1, BlockQ8_1>;
    case DType::kQ8_0: return VecDotBlocks<BlockQ8_0, BlockQ8_0>;
    default: return nullptr;
  }
}

}  // namespace cohort::kernels::ref
