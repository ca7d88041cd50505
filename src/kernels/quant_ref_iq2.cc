// The scalar reference for the grid i-quants, so far IQ2_XXS (GGML type 16, 256 values in 66
// bytes): dequantization, a simple quantizer (valid blocks for `cohort synth`; not ggml's
// importance-weighted search, which llama-quantize runs), and the dot product with a Q8_K row
// in four orders: ggml's generic one, llama.cpp's x86 vec-dot (AVX2, which its AVX-512 builds
// take too), its x86 panel GEMM for batches of >= 8 tokens (iqp.cpp), and its ARM NEON vec-dot.
// Compiled with -ffp-contract=off: each fused step of those kernels is written as std::fma.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// Per super-block: the 256 signed grid values and the 8 sub-block scales 2 * ls + 1.
struct DecodedIq2 {
  int8_t v[kQK_K];
  int scale[8];
};
void Decode(const BlockIq2Xxs& b, DecodedIq2* out) {
  for (int ib = 0; ib < 8; ++ib) out->scale[ib] = DecodeIq2XxsSubBlock(b, ib, out->v + 32 * ib);
}

int SubBlockDot(const int8_t* v, const int8_t* q8) {
  int sum = 0;
  for (int e = 0; e < 32; ++e) sum += v[e] * q8[e];
  return sum;
}

// ggml_vec_dot_iq2_xxs_q8_K_generic: the super-block's integer sum, sumf += d * sum, then / 8.
float VecDotIq2XxsGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  DecodedIq2 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) bsum += dec.scale[ib] * SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib);
    sum += Fp16ToFp32(x[i].d) * y[i].d * static_cast<float>(bsum);
  }
  return 0.125f * sum;
}

// llama.cpp's AVX2 ggml_vec_dot_iq2_xxs_q8_K: the signs go onto the activations in 8 bits
// (X86Product: a -128 under a minus sign wraps), maddubs + madd by the scale leave 8 int lanes
// (lane m: values 4m..4m+3 of every sub-block), one fma per super-block with d_w * d_a into 8
// float lanes, reduced as hsum_float_8 and scaled by 1/8.
float VecDotIq2XxsX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  DecodedIq2 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sums[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      for (int e = 0; e < 32; ++e) sums[e / 4] += dec.scale[ib] * X86Product(dec.v[32 * ib + e], y[i].qs[32 * ib + e]);
    }
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(d, static_cast<float>(sums[m]), lanes[m]);
  }
  return 0.125f * X86HorizontalSum8(lanes);
}

// llama.cpp's x86 panel GEMM (iqp.cpp), batches of >= 8 tokens: the super-block's integer sum
// with true products, added by fma(sum, (d_w / 8) * d_a, acc).
float VecDotIq2XxsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  DecodedIq2 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sum = 0;
    for (int ib = 0; ib < 8; ++ib) sum += dec.scale[ib] * SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib);
    acc = std::fma(static_cast<float>(sum), Fp16ToFp32(x[i].d) * 0.125f * y[i].d, acc);
  }
  return acc;
}

// llama.cpp's ARM NEON ggml_vec_dot_iq2_xxs_q8_K (as GCC and Clang contract it): true
// products; per super-block two float sums, of the even and of the odd sub-blocks, each
// sub-block's integer sum times (0.5 + ls) by one fma; then sumf = fma(d, sum1 + sum2, sumf),
// and the total times 1/4.
float VecDotIq2XxsArm(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  DecodedIq2 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    float sum[2] = {0, 0};
    for (int ib = 0; ib < 8; ++ib) {
      const float ls = 0.5f + static_cast<float>((dec.scale[ib] - 1) / 2);
      sum[ib % 2] = std::fma(static_cast<float>(SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib)), ls, sum[ib % 2]);
    }
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, sum[0] + sum[1], sumf);
  }
  return 0.25f * sumf;
}

// The three magnitudes of the grid, in the format's units (value = d * (0.5 + ls) / 4 * m).
constexpr int kLevels[3] = {8, 25, 43};

int NearestLevel(float m) {
  if (m < (kLevels[0] + kLevels[1]) * 0.5f) return 0;
  return m < (kLevels[1] + kLevels[2]) * 0.5f ? 1 : 2;
}

// For each of the 3^8 level patterns of a group of 8 magnitudes, the grid point nearest it
// (least squares over the 8 magnitudes; the lowest index on a tie). Built once, 6561 entries.
const std::array<uint8_t, 6561>& NearestGridPoint() {
  static const std::array<uint8_t, 6561> table = [] {
    std::array<uint8_t, 6561> t{};
    for (int code = 0; code < 6561; ++code) {
      int levels[8];
      for (int j = 0, c = code; j < 8; ++j, c /= 3) levels[j] = kLevels[c % 3];
      int best = 0;
      int64_t best_err = INT64_MAX;
      for (int g = 0; g < 256; ++g) {
        int64_t err = 0;
        for (int j = 0; j < 8; ++j) {
          const int diff = static_cast<int>((kIq2XxsGrid[g] >> (8 * j)) & 0xff) - levels[j];
          err += diff * diff;
        }
        if (err < best_err) {
          best_err = err;
          best = g;
        }
      }
      t[static_cast<size_t>(code)] = static_cast<uint8_t>(best);
    }
    return t;
  }();
  return table;
}

// One group of 8: its grid index and 7 sign bits. The signs must have an even count of minus
// signs (the 8th is implied): if not, the smallest value takes the wrong sign.
void QuantizeGroup(const float* x, float inverse_scale, int* index, uint32_t* sign_bits) {
  int code = 0, power = 1;
  uint32_t signs = 0;
  int smallest = 0;
  for (int j = 0; j < 8; ++j) {
    if (x[j] < 0) signs |= 1u << j;
    if (std::fabs(x[j]) < std::fabs(x[smallest])) smallest = j;
    code += NearestLevel(std::fabs(x[j]) * inverse_scale) * power;
    power *= 3;
  }
  if (__builtin_popcount(signs) & 1) signs ^= 1u << smallest;
  *index = NearestGridPoint()[static_cast<size_t>(code)];
  *sign_bits = signs & 127;
}

// Sub-block scales: each sub-block's largest magnitude maps to the top level 43; the super
// scale d makes the largest sub-block scale ls = 15.
void QuantizeIq2XxsBlock(const float* x, BlockIq2Xxs* y) {
  float step[8];  // the ideal d * (0.5 + ls) / 4 of each sub-block
  float step_max = 0;
  for (int ib = 0; ib < 8; ++ib) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * ib + j]));
    step[ib] = amax / kLevels[2];
    step_max = std::max(step_max, step[ib]);
  }
  const float d = step_max / (15.5f / 4);
  y->d = Fp32ToFp16(d);
  const float d_stored = Fp16ToFp32(y->d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = d_stored > 0 ? std::clamp(NearestInt(step[ib] / d_stored * 4 - 0.5f), 0, 15) : 0;
    const float scale = d_stored * (0.5f + ls) * 0.25f;
    const float inverse = scale > 0 ? 1 / scale : 0;
    uint32_t grid = 0, signs = static_cast<uint32_t>(ls) << 28;
    for (int l = 0; l < 4; ++l) {
      int index;
      uint32_t bits;
      QuantizeGroup(x + 32 * ib + 8 * l, inverse, &index, &bits);
      grid |= static_cast<uint32_t>(index) << (8 * l);
      signs |= bits << (7 * l);
    }
    std::memcpy(y->qs + 8 * ib, &grid, 4);
    std::memcpy(y->qs + 8 * ib + 4, &signs, 4);
  }
}

}  // namespace

bool IsIqGridType(DType type) { return type == DType::kIQ2_XXS || IsIq2sType(type) || IsIq1Type(type); }

void DequantizeIqGridRow(DType type, const void* src, float* dst, int64_t n) {
  if (IsIq2sType(type)) return DequantizeIq2sRow(type, src, dst, n);
  if (IsIq1Type(type)) return DequantizeIq1Row(type, src, dst, n);
  COHORT_CHECK(type == DType::kIQ2_XXS);
  const auto* x = static_cast<const BlockIq2Xxs*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      int8_t v[32];
      const int scale = DecodeIq2XxsSubBlock(x[i], ib, v);
      // ggml: db = d * (0.5 + ls) * 0.25, value = db * magnitude * sign.
      const float db = d * (0.5f + static_cast<float>((scale - 1) / 2)) * 0.25f;
      for (int j = 0; j < 32; ++j) dst[i * kQK_K + 32 * ib + j] = db * static_cast<float>(v[j]);
    }
  }
}

void QuantizeIqGridRow(DType type, const float* src, void* dst, int64_t n) {
  if (IsIq2sType(type)) return QuantizeIq2sRow(type, src, dst, n);
  if (IsIq1Type(type)) return QuantizeIq1Row(type, src, dst, n);
  COHORT_CHECK(type == DType::kIQ2_XXS);
  auto* y = static_cast<BlockIq2Xxs*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) QuantizeIq2XxsBlock(src + i * kQK_K, y + i);
}

VecDotFn GetIqGridVecDot(DType weight) {
  if (IsIq1Type(weight)) return GetIq1VecDot(weight);
  return weight == DType::kIQ2_XXS ? VecDotIq2XxsGeneric : GetIq2sVecDot(weight);
}
VecDotFn GetIqGridX86OrderVecDot(DType weight) {
  if (IsIq1Type(weight)) return GetIq1X86OrderVecDot(weight);
  return weight == DType::kIQ2_XXS ? VecDotIq2XxsX86 : GetIq2sX86OrderVecDot(weight);
}
VecDotFn GetIqGridX86OrderVecDotGrouped(DType weight) {
  if (IsIq1Type(weight)) return GetIq1X86OrderVecDotGrouped(weight);
  return weight == DType::kIQ2_XXS ? VecDotIq2XxsPanel : GetIq2sX86OrderVecDotGrouped(weight);
}
VecDotFn GetIqGridArmOrderVecDot(DType weight) {
  if (IsIq1Type(weight)) return GetIq1ArmOrderVecDot(weight);
  return weight == DType::kIQ2_XXS ? VecDotIq2XxsArm : GetIq2sArmOrderVecDot(weight);
}

}  // namespace cohort::kernels::ref
