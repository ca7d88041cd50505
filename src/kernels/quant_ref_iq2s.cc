// The scalar reference for IQ2_XS (GGML type 17, 256 values in 74 bytes) and IQ2_S (type 22, 82
// bytes): dequantization, a simple quantizer (valid blocks for `cohort synth`; not ggml's
// importance-weighted search, which llama-quantize runs), and the dot product with a Q8_K row in
// four orders: ggml's generic one, llama.cpp's x86 vec-dot (AVX2, which its AVX-512 builds take
// too), its x86 panel GEMM for batches of >= 8 tokens (iqp.cpp), and its ARM NEON vec-dot.
// Compiled with -ffp-contract=off: each fused step of those kernels is written as std::fma.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/iq2_grids_xs.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// Per super-block: the 256 signed grid values and the 16 scales 2 * ls + 1, one per 16 values.
struct Decoded {
  int8_t v[kQK_K];
  int scale[16];
};
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
void Decode(const Block& b, Decoded* out) {
  for (int ib = 0; ib < 8; ++ib) {
    const Iq2SubBlock s = kSubBlock(b, ib);
    Iq2SubBlockValues(s, out->v + 32 * ib);
    out->scale[2 * ib] = s.scale[0];
    out->scale[2 * ib + 1] = s.scale[1];
  }
}

// The super-block's integer sum with true products: sum over halves of scale * dot.
int TrueSum(const Decoded& dec, const int8_t* q8) {
  int sum = 0;
  for (int h = 0; h < 16; ++h) {
    int dot = 0;
    for (int e = 16 * h; e < 16 * h + 16; ++e) dot += dec.v[e] * q8[e];
    sum += dec.scale[h] * dot;
  }
  return sum;
}

// ggml_vec_dot_iq2_{xs,s}_q8_K_generic: sumf += d * bsum per super-block, then / 8.
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
float VecDotGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sum = 0;
  Decoded dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode<Block, kSubBlock>(x[i], &dec);
    sum += Fp16ToFp32(x[i].d) * y[i].d * static_cast<float>(TrueSum(dec, y[i].qs));
  }
  return 0.125f * sum;
}

// llama.cpp's AVX2 ggml_vec_dot_iq2_{xs,s}_q8_K: the signs go onto the activations in 8 bits
// (sign_epi8 for IQ2_XS, xor-and-subtract for IQ2_S; X86Product either way: a -128 under a minus
// sign wraps), maddubs with the grid bytes and madd by the scale of each 16 values leave 8 int
// lanes (lane m: values 4m..4m+3 of every sub-block; the kernels' two integer accumulators are
// exact, so their split does not matter), one fma per super-block with d_w * d_a into 8 float
// lanes, reduced as hsum_float_8 and scaled by 1/8.
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
float VecDotX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  Decoded dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode<Block, kSubBlock>(x[i], &dec);
    int sums[8] = {};
    for (int e = 0; e < kQK_K; ++e) sums[(e % 32) / 4] += dec.scale[e / 16] * X86Product(dec.v[e], y[i].qs[e]);
    const float d = Fp16ToFp32(x[i].d) * y[i].d;
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(d, static_cast<float>(sums[m]), lanes[m]);
  }
  return 0.125f * X86HorizontalSum8(lanes);
}

// llama.cpp's x86 panel GEMM (iqp.cpp: iqp_decode_iq2_{xs,s}), batches of >= 8 tokens: the
// super-block's integer sum with true products, added by fma(sum, (d_w / 8) * d_a, acc).
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
float VecDotPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  Decoded dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode<Block, kSubBlock>(x[i], &dec);
    acc = std::fma(static_cast<float>(TrueSum(dec, y[i].qs)), Fp16ToFp32(x[i].d) * 0.125f * y[i].d, acc);
  }
  return acc;
}

// llama.cpp's ARM NEON ggml_vec_dot_iq2_{xs,s}_q8_K (as GCC and Clang contract it): true
// products, the super-block's integer sum, sumf = fma(d_w * d_a, sum, sumf), the total / 8.
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
float VecDotArm(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  Decoded dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode<Block, kSubBlock>(x[i], &dec);
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, static_cast<float>(TrueSum(dec, y[i].qs)), sumf);
  }
  return 0.125f * sumf;
}

// The three magnitudes of the grids, in the format's units (value = d * (0.5 + ls) / 4 * m).
constexpr int kLevels[3] = {8, 25, 43};
constexpr int kPatterns = 6561;  // 3^8 level patterns of a group of 8

int NearestLevel(float m) {
  if (m < (kLevels[0] + kLevels[1]) * 0.5f) return 0;
  return m < (kLevels[1] + kLevels[2]) * 0.5f ? 1 : 2;
}

// For each level pattern, the grid point nearest it (least squares over the 8 magnitudes; the
// lowest index on a tie).
std::vector<uint16_t> NearestGridPoints(const uint64_t* grid, int n_points) {
  std::vector<uint16_t> table(kPatterns);
  for (int code = 0; code < kPatterns; ++code) {
    int levels[8];
    for (int j = 0, c = code; j < 8; ++j, c /= 3) levels[j] = kLevels[c % 3];
    int best = 0;
    int64_t best_err = INT64_MAX;
    for (int g = 0; g < n_points; ++g) {
      int64_t err = 0;
      for (int j = 0; j < 8; ++j) {
        const int diff = static_cast<int>((grid[g] >> (8 * j)) & 0xff) - levels[j];
        err += diff * diff;
      }
      if (err < best_err) {
        best_err = err;
        best = g;
      }
    }
    table[static_cast<size_t>(code)] = static_cast<uint16_t>(best);
  }
  return table;
}

const std::vector<uint16_t>& NearestTable(DType type) {
  static const std::vector<uint16_t> xs = NearestGridPoints(kIq2XsGrid, 512);
  static const std::vector<uint16_t> s = NearestGridPoints(kIq2SGrid, 1024);
  return type == DType::kIQ2_XS ? xs : s;
}

// One group of 8: its grid index and its 8 signs (bit j: value j negative). IQ2_XS stores 7 and
// implies the 8th by parity: there, an odd count of minus signs flips the smallest value's.
void QuantizeGroup(DType type, const float* x, float inverse_scale, int* index, uint32_t* signs_out) {
  int code = 0, power = 1;
  uint32_t signs = 0;
  int smallest = 0;
  for (int j = 0; j < 8; ++j) {
    if (x[j] < 0) signs |= 1u << j;
    if (std::fabs(x[j]) < std::fabs(x[smallest])) smallest = j;
    code += NearestLevel(std::fabs(x[j]) * inverse_scale) * power;
    power *= 3;
  }
  if (type == DType::kIQ2_XS && (__builtin_popcount(signs) & 1)) signs ^= 1u << smallest;
  *index = NearestTable(type)[static_cast<size_t>(code)];
  *signs_out = signs;
}

// The 16 scales of a super-block of 256 values: each 16 values' largest magnitude maps to the
// top level 43; the super scale d (returned, as fp16 bits) makes the largest ls = 15.
uint16_t ChooseScales(const float* x, int ls[16]) {
  float step[16];  // the ideal d * (0.5 + ls) / 4 of each 16 values
  float step_max = 0;
  for (int h = 0; h < 16; ++h) {
    float amax = 0;
    for (int j = 0; j < 16; ++j) amax = std::max(amax, std::fabs(x[16 * h + j]));
    step[h] = amax / kLevels[2];
    step_max = std::max(step_max, step[h]);
  }
  const uint16_t d_bits = Fp32ToFp16(step_max / (15.5f / 4));
  const float d = Fp16ToFp32(d_bits);
  for (int h = 0; h < 16; ++h) ls[h] = d > 0 ? std::clamp(NearestInt(step[h] / d * 4 - 0.5f), 0, 15) : 0;
  return d_bits;
}

// Quantizes the 256 values x: fills scales, calls store(group, index, signs) for each of the 32
// groups of 8, and returns d's fp16 bits.
template <typename Store>
uint16_t QuantizeGroups(DType type, const float* x, uint8_t scales[8], Store store) {
  int ls[16];
  const uint16_t d = ChooseScales(x, ls);
  const float d_stored = Fp16ToFp32(d);
  for (int ib = 0; ib < 8; ++ib) scales[ib] = static_cast<uint8_t>(ls[2 * ib] | ls[2 * ib + 1] << 4);
  for (int g = 0; g < 32; ++g) {
    const float scale = d_stored * (0.5f + static_cast<float>(ls[g / 2])) * 0.25f;
    int index;
    uint32_t signs;
    QuantizeGroup(type, x + 8 * g, scale > 0 ? 1 / scale : 0, &index, &signs);
    store(g, index, signs);
  }
  return d;
}

void QuantizeIq2XsBlock(const float* x, BlockIq2Xs* y) {
  y->d = QuantizeGroups(DType::kIQ2_XS, x, y->scales, [&](int g, int index, uint32_t signs) {
    y->qs[g] = static_cast<uint16_t>(index | (signs & 127) << 9);
  });
}

void QuantizeIq2SBlock(const float* x, BlockIq2S* y) {
  std::memset(y->qh, 0, sizeof(y->qh));
  y->d = QuantizeGroups(DType::kIQ2_S, x, y->scales, [&](int g, int index, uint32_t signs) {
    y->qs[g] = static_cast<uint8_t>(index & 0xff);
    y->qs[kQK_K / 8 + g] = static_cast<uint8_t>(signs);
    y->qh[g / 4] = static_cast<uint8_t>(y->qh[g / 4] | (index >> 8) << (2 * (g % 4)));
  });
}

// Dequantization as ggml's: db = d * (0.5 + ls) * 0.25 per 16 values, value = db * m * sign.
template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
void DequantizeRow(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(x[i].d);
    for (int ib = 0; ib < 8; ++ib) {
      const Iq2SubBlock s = kSubBlock(x[i], ib);
      int8_t v[32];
      Iq2SubBlockValues(s, v);
      float db[2];
      for (int h = 0; h < 2; ++h) db[h] = d * (0.5f + static_cast<float>((s.scale[h] - 1) / 2)) * 0.25f;
      for (int j = 0; j < 32; ++j) dst[i * kQK_K + 32 * ib + j] = db[j / 16] * static_cast<float>(v[j]);
    }
  }
}

}  // namespace

bool IsIq2sType(DType type) { return type == DType::kIQ2_XS || type == DType::kIQ2_S; }

void DequantizeIq2sRow(DType type, const void* src, float* dst, int64_t n) {
  COHORT_CHECK(IsIq2sType(type));
  if (type == DType::kIQ2_XS) return DequantizeRow<BlockIq2Xs, Iq2XsSubBlock>(src, dst, n);
  DequantizeRow<BlockIq2S, Iq2SSubBlock>(src, dst, n);
}

void QuantizeIq2sRow(DType type, const float* src, void* dst, int64_t n) {
  COHORT_CHECK(IsIq2sType(type));
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    if (type == DType::kIQ2_XS) {
      QuantizeIq2XsBlock(src + i * kQK_K, static_cast<BlockIq2Xs*>(dst) + i);
    } else {
      QuantizeIq2SBlock(src + i * kQK_K, static_cast<BlockIq2S*>(dst) + i);
    }
  }
}

VecDotFn GetIq2sVecDot(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDotGeneric<BlockIq2Xs, Iq2XsSubBlock>;
  return weight == DType::kIQ2_S ? VecDotGeneric<BlockIq2S, Iq2SSubBlock> : nullptr;
}
VecDotFn GetIq2sX86OrderVecDot(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDotX86<BlockIq2Xs, Iq2XsSubBlock>;
  return weight == DType::kIQ2_S ? VecDotX86<BlockIq2S, Iq2SSubBlock> : nullptr;
}
VecDotFn GetIq2sX86OrderVecDotGrouped(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDotPanel<BlockIq2Xs, Iq2XsSubBlock>;
  return weight == DType::kIQ2_S ? VecDotPanel<BlockIq2S, Iq2SSubBlock> : nullptr;
}
VecDotFn GetIq2sArmOrderVecDot(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDotArm<BlockIq2Xs, Iq2XsSubBlock>;
  return weight == DType::kIQ2_S ? VecDotArm<BlockIq2S, Iq2SSubBlock> : nullptr;
}

}  // namespace cohort::kernels::ref
