// The scalar reference for IQ3_XXS (GGML type 18, 256 values in 98 bytes) and IQ3_S (type 21,
// 256 values in 110 bytes): dequantization, a simple quantizer (valid blocks for `cohort synth`;
// not ggml's importance-weighted search, which llama-quantize runs), and the dot product with a
// Q8_K row in four orders: ggml's generic one, llama.cpp's x86 vec-dot (AVX2, which its AVX-512
// builds take too), its x86 panel GEMM for batches of >= 8 tokens (iqp.cpp), and its ARM NEON
// vec-dot. Compiled with -ffp-contract=off: each fused step of those kernels is written as std::fma.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/iq3_grids.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// Per super-block: the 256 signed grid values and the 8 sub-block scales 2 * ls + 1.
struct DecodedIq3 {
  int8_t v[kQK_K];
  int scale[8];
};
void Decode(const BlockIq3Xxs& b, DecodedIq3* out) {
  for (int ib = 0; ib < 8; ++ib) out->scale[ib] = DecodeIq3XxsSubBlock(b, ib, out->v + 32 * ib);
}
void Decode(const BlockIq3S& b, DecodedIq3* out) {
  for (int ib = 0; ib < 8; ++ib) out->scale[ib] = DecodeIq3SSubBlock(b, ib, out->v + 32 * ib);
}

// value = d * kUnit * scale * v: IQ3_XXS's d * (0.5 + ls) / 2, IQ3_S's d * (1 + 2 * ls). The
// vec-dots multiply their float total by kUnit, the panel GEMM folds it into d (iqp.cpp's dfac).
template <class Block>
constexpr float kUnit = 0.0f;
template <>
constexpr float kUnit<BlockIq3Xxs> = 0.25f;
template <>
constexpr float kUnit<BlockIq3S> = 1.0f;

int SubBlockDot(const int8_t* v, const int8_t* q8) {
  int sum = 0;
  for (int e = 0; e < 32; ++e) sum += v[e] * q8[e];
  return sum;
}

// ggml_vec_dot_iq3_{xxs,s}_q8_K_generic: the super-block's integer sum, sumf += d * sum, times
// the unit at the end.
template <class Block>
float VecDotGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  DecodedIq3 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int bsum = 0;
    for (int ib = 0; ib < 8; ++ib) bsum += dec.scale[ib] * SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib);
    sum += Fp16ToFp32(x[i].d) * y[i].d * static_cast<float>(bsum);
  }
  return kUnit<Block> * sum;
}

// llama.cpp's AVX2 ggml_vec_dot_iq3_xxs_q8_K and ggml_vec_dot_iq3_s_q8_K: the signs go onto the
// activations in 8 bits (sign_epi8, or xor and subtract: X86Product, a -128 under a minus sign
// wraps), maddubs + madd by the scale leave 8 int lanes (lane m: values 4m..4m+3 of every
// sub-block), one fma per super-block with d_w * d_a into 8 float lanes, reduced as
// hsum_float_8 and times the unit.
template <class Block>
float VecDotX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  DecodedIq3 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sums[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      for (int e = 0; e < 32; ++e) sums[e / 4] += dec.scale[ib] * X86Product(dec.v[32 * ib + e], y[i].qs[32 * ib + e]);
    }
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(d, static_cast<float>(sums[m]), lanes[m]);
  }
  return kUnit<Block> * X86HorizontalSum8(lanes);  // IQ3_S's unit 1 changes no bits
}

// llama.cpp's x86 panel GEMM (iqp.cpp), batches of >= 8 tokens: the super-block's integer sum
// with true products, added by fma(sum, dfac * d_a, acc), dfac = d_w * unit.
template <class Block>
float VecDotPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  DecodedIq3 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sum = 0;
    for (int ib = 0; ib < 8; ++ib) sum += dec.scale[ib] * SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib);
    acc = std::fma(static_cast<float>(sum), Fp16ToFp32(x[i].d) * kUnit<Block> * y[i].d, acc);
  }
  return acc;
}

// llama.cpp's ARM NEON ggml_vec_dot_iq3_xxs_q8_K (as GCC and Clang contract it): true products;
// per super-block two float sums, of the even and of the odd sub-blocks, each sub-block's
// integer sum times (0.5 + ls) by one fma; then sumf = fma(d, sum1 + sum2, sumf), the total
// times 1/2. (Its IQ3_S kernel keeps integer sums and adds fma(d, sum, sumf) per super-block:
// the panel order, VecDotPanel<BlockIq3S>.)
float VecDotIq3XxsArm(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq3Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  DecodedIq3 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    float sum[2] = {0, 0};
    for (int ib = 0; ib < 8; ++ib) {
      const float ls = 0.5f + static_cast<float>((dec.scale[ib] - 1) / 2);
      sum[ib % 2] = std::fma(static_cast<float>(SubBlockDot(dec.v + 32 * ib, y[i].qs + 32 * ib)), ls, sum[ib % 2]);
    }
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, sum[0] + sum[1], sumf);
  }
  return 0.5f * sumf;
}

// The quantizer's view of a grid: its 8 magnitude levels and, for each of the 8^4 level
// patterns of a group of 4, the grid point nearest it (least squares over the 4 magnitudes; the
// lowest index on a tie).
struct GridCode {
  const uint32_t* grid;
  int size;
  int levels[8];
  std::vector<uint16_t> nearest;  // 4096 entries
};

GridCode MakeGridCode(const uint32_t* grid, int size, const std::array<int, 8>& levels) {
  GridCode c{grid, size, {}, std::vector<uint16_t>(4096)};
  std::copy(levels.begin(), levels.end(), c.levels);
  for (int code = 0; code < 4096; ++code) {
    int want[4];
    for (int j = 0; j < 4; ++j) want[j] = levels[static_cast<size_t>((code >> (3 * j)) & 7)];
    int best = 0;
    int best_err = INT32_MAX;
    for (int g = 0; g < size; ++g) {
      int err = 0;
      for (int j = 0; j < 4; ++j) {
        const int diff = static_cast<int>((grid[g] >> (8 * j)) & 0xff) - want[j];
        err += diff * diff;
      }
      if (err < best_err) {
        best_err = err;
        best = g;
      }
    }
    c.nearest[static_cast<size_t>(code)] = static_cast<uint16_t>(best);
  }
  return c;
}

const GridCode& Iq3XxsCode() {
  static const GridCode code = MakeGridCode(kIq3XxsGrid, 256, {4, 12, 20, 28, 36, 44, 52, 62});
  return code;
}
const GridCode& Iq3SCode() {
  static const GridCode code = MakeGridCode(kIq3SGrid, 512, {1, 3, 5, 7, 9, 11, 13, 15});
  return code;
}

int NearestLevel(const GridCode& c, float m) {
  int best = 0;
  for (int k = 1; k < 8; ++k) {
    if (std::fabs(m - static_cast<float>(c.levels[k])) < std::fabs(m - static_cast<float>(c.levels[best]))) best = k;
  }
  return best;
}

// The grid index of 4 values at the given inverse step.
int QuantizeGroup4(const GridCode& c, const float* x, float inverse_step) {
  int code = 0;
  for (int j = 0; j < 4; ++j) code |= NearestLevel(c, std::fabs(x[j]) * inverse_step) << (3 * j);
  return c.nearest[static_cast<size_t>(code)];
}

// The 8 sign bits of a group of 8 values (bit j: value j negative). With `even`, the count of
// minus signs must be even (IQ3_XXS stores 7 and implies the 8th): if not, the smallest value
// takes the wrong sign.
uint32_t GroupSigns(const float* x, bool even) {
  uint32_t signs = 0;
  int smallest = 0;
  for (int j = 0; j < 8; ++j) {
    if (x[j] < 0) signs |= 1u << j;
    if (std::fabs(x[j]) < std::fabs(x[smallest])) smallest = j;
  }
  if (even && (__builtin_popcount(signs) & 1)) signs ^= 1u << smallest;
  return signs;
}

// Scales shared by both types: a sub-block's step is d * unit * (2 * ls + 1); its largest
// magnitude maps to the top level, and d makes the largest sub-block's ls = 15. Returns d as
// stored, and each sub-block's ls and inverse step.
struct Iq3Scales {
  uint16_t d;
  int ls[8];
  float inverse_step[8];
};
Iq3Scales ChooseScales(const float* x, const GridCode& c, float unit) {
  float step[8];
  float step_max = 0;
  for (int ib = 0; ib < 8; ++ib) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * ib + j]));
    step[ib] = amax / static_cast<float>(c.levels[7]);
    step_max = std::max(step_max, step[ib]);
  }
  Iq3Scales s{};
  s.d = Fp32ToFp16(step_max / (31 * unit));
  const float d = Fp16ToFp32(s.d);
  for (int ib = 0; ib < 8; ++ib) {
    s.ls[ib] = d > 0 ? std::clamp(NearestInt((step[ib] / (d * unit) - 1) * 0.5f), 0, 15) : 0;
    const float actual = d * unit * static_cast<float>(2 * s.ls[ib] + 1);
    s.inverse_step[ib] = actual > 0 ? 1 / actual : 0;
  }
  return s;
}

void QuantizeIq3XxsBlock(const float* x, BlockIq3Xxs* y) {
  const GridCode& c = Iq3XxsCode();
  const Iq3Scales s = ChooseScales(x, c, kUnit<BlockIq3Xxs>);
  y->d = s.d;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    uint32_t word = static_cast<uint32_t>(s.ls[ib]) << 28;
    for (int k = 0; k < 8; ++k) {
      y->qs[8 * ib + k] = static_cast<uint8_t>(QuantizeGroup4(c, xb + 4 * k, s.inverse_step[ib]));
    }
    for (int l = 0; l < 4; ++l) word |= (GroupSigns(xb + 8 * l, true) & 127) << (7 * l);
    std::memcpy(y->qs + kQK_K / 4 + 4 * ib, &word, 4);
  }
}

void QuantizeIq3SBlock(const float* x, BlockIq3S* y) {
  const GridCode& c = Iq3SCode();
  const Iq3Scales s = ChooseScales(x, c, kUnit<BlockIq3S>);
  std::memset(y, 0, sizeof *y);
  y->d = s.d;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    for (int k = 0; k < 8; ++k) {
      const int index = QuantizeGroup4(c, xb + 4 * k, s.inverse_step[ib]);
      y->qs[8 * ib + k] = static_cast<uint8_t>(index & 0xff);
      y->qh[ib] = static_cast<uint8_t>(y->qh[ib] | ((index >> 8) << k));
    }
    for (int l = 0; l < 4; ++l) y->signs[4 * ib + l] = static_cast<uint8_t>(GroupSigns(xb + 8 * l, false));
    y->scales[ib / 2] = static_cast<uint8_t>(y->scales[ib / 2] | (s.ls[ib] << (4 * (ib % 2))));
  }
}

// dequantize_row_iq3_xxs: db = d * (0.5 + ls) * 0.5; dequantize_row_iq3_s: db = d * (1 + 2 * ls);
// value = db * magnitude * sign.
void DequantizeIq3XxsBlock(const BlockIq3Xxs& b, float* dst) {
  const float d = Fp16ToFp32(b.d);
  int8_t v[32];
  for (int ib = 0; ib < 8; ++ib) {
    const int scale = DecodeIq3XxsSubBlock(b, ib, v);
    const float db = d * (0.5f + static_cast<float>((scale - 1) / 2)) * 0.5f;
    for (int j = 0; j < 32; ++j) dst[32 * ib + j] = db * static_cast<float>(v[j]);
  }
}
void DequantizeIq3SBlock(const BlockIq3S& b, float* dst) {
  const float d = Fp16ToFp32(b.d);
  int8_t v[32];
  for (int ib = 0; ib < 8; ++ib) {
    const float db = d * static_cast<float>(DecodeIq3SSubBlock(b, ib, v));
    for (int j = 0; j < 32; ++j) dst[32 * ib + j] = db * static_cast<float>(v[j]);
  }
}

}  // namespace

bool IsIq3Type(DType type) { return type == DType::kIQ3_XXS || type == DType::kIQ3_S; }

void DequantizeIq3Row(DType type, const void* src, float* dst, int64_t n) {
  COHORT_CHECK(IsIq3Type(type));
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    if (type == DType::kIQ3_XXS) {
      DequantizeIq3XxsBlock(static_cast<const BlockIq3Xxs*>(src)[i], dst + i * kQK_K);
    } else {
      DequantizeIq3SBlock(static_cast<const BlockIq3S*>(src)[i], dst + i * kQK_K);
    }
  }
}

void QuantizeIq3Row(DType type, const float* src, void* dst, int64_t n) {
  COHORT_CHECK(IsIq3Type(type));
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    if (type == DType::kIQ3_XXS) {
      QuantizeIq3XxsBlock(src + i * kQK_K, static_cast<BlockIq3Xxs*>(dst) + i);
    } else {
      QuantizeIq3SBlock(src + i * kQK_K, static_cast<BlockIq3S*>(dst) + i);
    }
  }
}

VecDotFn GetIq3VecDot(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotGeneric<BlockIq3Xxs>;
  return weight == DType::kIQ3_S ? VecDotGeneric<BlockIq3S> : nullptr;
}
VecDotFn GetIq3X86OrderVecDot(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotX86<BlockIq3Xxs>;
  return weight == DType::kIQ3_S ? VecDotX86<BlockIq3S> : nullptr;
}
VecDotFn GetIq3X86OrderVecDotGrouped(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotPanel<BlockIq3Xxs>;
  return weight == DType::kIQ3_S ? VecDotPanel<BlockIq3S> : nullptr;
}
VecDotFn GetIq3ArmOrderVecDot(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotIq3XxsArm;
  return weight == DType::kIQ3_S ? VecDotPanel<BlockIq3S> : nullptr;
}

}  // namespace cohort::kernels::ref
