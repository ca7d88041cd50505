// The scalar reference for the 1-bit grid i-quants, IQ1_S (GGML type 19, 256 values in 50
// bytes) and IQ1_M (type 29, 256 values in 56 bytes): dequantization, a simple quantizer (valid
// blocks for `cohort synth`; not ggml's importance-weighted search, which llama-quantize runs),
// and the dot product with a Q8_K row in four orders: ggml's generic one, llama.cpp's x86
// vec-dot (AVX2, which its AVX-512 builds take too), its x86 panel GEMM for batches of >= 8
// tokens (iqp.cpp), and its ARM NEON vec-dot. Every order adds the grid part and the delta part
// (the +-1/8 shifts, ggml's IQ1S_DELTA / IQ1M_DELTA) as two sums and joins them at its own step.
// Compiled with -ffp-contract=off: each fused step of those kernels is written as std::fma.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/iq1_grids.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

template <typename Block>
float SuperScale(const Block& b) {
  return Fp16ToFp32(Iq1SuperScaleBits(b));
}

struct DecodedIq1 {
  Iq1SubBlock sub[8];
};
template <typename Block>
void Decode(const Block& b, DecodedIq1* out) {
  for (int ib = 0; ib < 8; ++ib) DecodeIq1SubBlock(b, ib, &out->sub[ib]);
}

// The super-block's sum of scale * grid value * activation (true products).
int GridSum(const DecodedIq1& dec, const int8_t* q8) {
  int sum = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const Iq1SubBlock& s = dec.sub[ib];
    for (int e = 0; e < 32; ++e) sum += s.scale[e / 16] * s.v[e] * q8[32 * ib + e];
  }
  return sum;
}

// The super-block's sum of scale * delta sign * activation, as llama.cpp's kernels take it:
// IQ1_S (one delta per 32 values) from the Q8_K block's 16-value sums, IQ1_M from the values.
int DeltaSum(const DecodedIq1& dec, const BlockQ8_K& y, const BlockIq1S&) {
  int sum = 0;
  for (int ib = 0; ib < 8; ++ib) {
    sum += (y.bsums[2 * ib] + y.bsums[2 * ib + 1]) * dec.sub[ib].delta[0] * dec.sub[ib].scale[0];
  }
  return sum;
}
int DeltaSum(const DecodedIq1& dec, const BlockQ8_K& y, const BlockIq1M&) {
  int sum = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const Iq1SubBlock& s = dec.sub[ib];
    for (int e = 0; e < 32; ++e) sum += s.scale[e / 16] * s.delta[e / 8] * y.qs[32 * ib + e];
  }
  return sum;
}

// ggml_vec_dot_iq1_{s,m}_q8_K_generic: sumf += d_w * d_a * (grid sum + sum of deltas / 8).
template <typename Block>
float VecDotGeneric(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  DecodedIq1 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    const float joined = static_cast<float>(GridSum(dec, y[i].qs)) +
                         kIq1Delta * static_cast<float>(DeltaSum(dec, y[i], x[i]));
    sumf += SuperScale(x[i]) * y[i].d * joined;
  }
  return sumf;
}

// llama.cpp's AVX2 ggml_vec_dot_iq1_s_q8_K: the grid part as x86 multiplies bytes (mul_add_epi8:
// the grid value's sign moves onto the activation in 8 bits, X86Product), madd by the scale into
// 8 int lanes (lane m: values 4m..4m+3 of every sub-block), one fma per super-block with
// d = d_a * d_w into 8 float lanes; the delta part from the 16-value sums in one float by
// fma(d, sum, accum1) (GCC fuses `accum1 += d * sumi1`); hsum_float_8 of the lanes plus
// 1/8 * accum1, a multiply and an add.
float VecDotIq1SX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float lanes[8] = {};
  float accum1 = 0;
  DecodedIq1 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sums[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      const Iq1SubBlock& s = dec.sub[ib];
      for (int e = 0; e < 32; ++e) sums[e / 4] += s.scale[0] * X86Product(s.v[e], y[i].qs[32 * ib + e]);
    }
    const float d = y[i].d * SuperScale(x[i]);
    for (int m = 0; m < 8; ++m) lanes[m] = std::fma(d, static_cast<float>(sums[m]), lanes[m]);
    accum1 = std::fma(d, static_cast<float>(DeltaSum(dec, y[i], x[i])), accum1);
  }
  const float delta = kIq1Delta * accum1;
  return X86HorizontalSum8(lanes) + delta;
}

// llama.cpp's AVX2 ggml_vec_dot_iq1_m_q8_K: grid and delta parts both as x86 multiplies bytes
// (the delta's sign moved onto the activation by sign_epi8: X86Product), each madd by the
// scales of its 16 values into 8 int lanes and fma'd by d = d_a * d_w into 8 float lanes of
// its own; then fma(hsum_float_8(delta lanes), 1/8, hsum_float_8(grid lanes)).
float VecDotIq1MX86(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1M*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float grid_lanes[8] = {}, delta_lanes[8] = {};
  DecodedIq1 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int grid[8] = {}, delta[8] = {};
    for (int ib = 0; ib < 8; ++ib) {
      const Iq1SubBlock& s = dec.sub[ib];
      for (int e = 0; e < 32; ++e) {
        const int q = y[i].qs[32 * ib + e];
        grid[e / 4] += s.scale[e / 16] * X86Product(s.v[e], q);
        delta[e / 4] += s.scale[e / 16] * X86Product(s.delta[e / 8], q);
      }
    }
    const float d = y[i].d * SuperScale(x[i]);
    for (int m = 0; m < 8; ++m) {
      grid_lanes[m] = std::fma(d, static_cast<float>(grid[m]), grid_lanes[m]);
      delta_lanes[m] = std::fma(d, static_cast<float>(delta[m]), delta_lanes[m]);
    }
  }
  return std::fma(X86HorizontalSum8(delta_lanes), kIq1Delta, X86HorizontalSum8(grid_lanes));
}

// llama.cpp's x86 panel GEMM (iqp.cpp), batches of >= 8 tokens: the values decoded as
// 8 * grid + delta (so the /8 moves into the float factor), the super-block's integer sum of
// scale * value * activation with true products, added by fma(sum, (d_w / 8) * d_a, acc).
template <typename Block>
float VecDotPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  DecodedIq1 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    int sum = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const Iq1SubBlock& s = dec.sub[ib];
      for (int h = 0; h < 2; ++h) {
        int half = 0;
        for (int e = 16 * h; e < 16 * h + 16; ++e) half += (8 * s.v[e] + s.delta[e / 8]) * y[i].qs[32 * ib + e];
        sum += s.scale[h] * half;
      }
    }
    acc = std::fma(static_cast<float>(sum), SuperScale(x[i]) * 0.125f * y[i].d, acc);
  }
  return acc;
}

// llama.cpp's ARM NEON ggml_vec_dot_iq1_{s,m}_q8_K (as GCC and Clang contract it): true
// products (sdot); per super-block the grid sum and the delta sum as integers, joined as
// fma(1/8, delta sum, grid sum), then sumf = fma(d_a * d_w, joined, sumf).
template <typename Block>
float VecDotArm(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  DecodedIq1 dec;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    Decode(x[i], &dec);
    const float joined = std::fma(kIq1Delta, static_cast<float>(DeltaSum(dec, y[i], x[i])),
                                  static_cast<float>(GridSum(dec, y[i].qs)));
    sumf = std::fma(y[i].d * SuperScale(x[i]), joined, sumf);
  }
  return sumf;
}

// --- The quantizer -------------------------------------------------------------------------

// For each of the 3^8 ternary patterns of a group of 8, the grid point nearest it (least
// squares; the lowest index on a tie). Digit j of the code is value j + 1. Built once.
const std::array<uint16_t, 6561>& NearestGridPoint() {
  static const std::array<uint16_t, 6561> table = [] {
    std::array<uint16_t, 6561> t{};
    for (int code = 0; code < 6561; ++code) {
      int want[8];
      for (int j = 0, c = code; j < 8; ++j, c /= 3) want[j] = c % 3 - 1;
      int best = 0, best_err = 1 << 30;
      for (int g = 0; g < 2048; ++g) {
        int8_t v[8];
        UnpackIq1Group(kIq1sGrid[g], v);
        int err = 0;
        for (int j = 0; j < 8; ++j) err += (v[j] - want[j]) * (v[j] - want[j]);
        if (err < best_err) {
          best_err = err;
          best = g;
        }
      }
      t[static_cast<size_t>(code)] = static_cast<uint16_t>(best);
    }
    return t;
  }();
  return table;
}

int Ternary(float u) { return std::clamp(NearestInt(u), -1, 1); }

// The delta sign that suits values x[0..n) in scale units (u = x * inverse): the sign of what
// rounding them to -1, 0, 1 leaves over (+1 on a tie).
int DeltaSignFor(const float* x, int n, float inverse) {
  float rest = 0;
  for (int j = 0; j < n; ++j) rest += x[j] * inverse - static_cast<float>(Ternary(x[j] * inverse));
  return rest < 0 ? -1 : 1;
}

// Group of 8 values: the grid index of its ternary pattern once the delta is taken off.
int GroupIndex(const float* x, float inverse, int delta) {
  int code = 0;
  for (int j = 7; j >= 0; --j) code = 3 * code + Ternary(x[j] * inverse - static_cast<float>(delta) * kIq1Delta) + 1;
  return NearestGridPoint()[static_cast<size_t>(code)];
}

// The step (the size of one grid unit) for n values: 1.5 times their mean magnitude, near the
// level of the best 3-level code of Gaussian values.
float Step(const float* x, int n) {
  float sum = 0;
  for (int j = 0; j < n; ++j) sum += std::fabs(x[j]);
  return 1.5f * sum / static_cast<float>(n);
}

// The 3-bit scale ls whose d * (2 * ls + 1) is nearest `step`, and the inverse of that step.
int ScaleFor(float step, float d, float* inverse) {
  const int ls = d > 0 ? std::clamp(NearestInt((step / d - 1) * 0.5f), 0, 7) : 0;
  const float s = d * static_cast<float>(2 * ls + 1);
  *inverse = s > 0 ? 1 / s : 0;
  return ls;
}

// IQ1_S: one step per 32 values; the super scale d makes the largest step's scale 2 * 7 + 1.
void QuantizeIq1SBlock(const float* x, BlockIq1S* y) {
  float step[8], step_max = 0;
  for (int ib = 0; ib < 8; ++ib) step_max = std::max(step_max, step[ib] = Step(x + 32 * ib, 32));
  y->d = Fp32ToFp16(step_max / 15);
  const float d = Fp16ToFp32(y->d);
  for (int ib = 0; ib < 8; ++ib) {
    float inverse;
    const int ls = ScaleFor(step[ib], d, &inverse);
    const float* xb = x + 32 * ib;
    const int delta = DeltaSignFor(xb, 32, inverse);
    uint16_t qh = static_cast<uint16_t>(ls << 12 | (delta < 0 ? 0x8000 : 0));
    for (int l = 0; l < 4; ++l) {
      const int index = GroupIndex(xb + 8 * l, inverse, delta);
      y->qs[4 * ib + l] = static_cast<uint8_t>(index & 0xff);
      qh = static_cast<uint16_t>(qh | (index >> 8) << (3 * l));
    }
    y->qh[ib] = qh;
  }
}

// IQ1_M: one step per 16 values, one delta per 8; the fp16 super scale goes into the top
// nibbles of the four scale words.
void QuantizeIq1MBlock(const float* x, BlockIq1M* y) {
  float step[16], step_max = 0;
  for (int k = 0; k < 16; ++k) step_max = std::max(step_max, step[k] = Step(x + 16 * k, 16));
  const uint16_t d_bits = Fp32ToFp16(step_max / 15);
  const float d = Fp16ToFp32(d_bits);
  uint16_t words[4] = {};
  for (int w = 0; w < 4; ++w) words[w] = static_cast<uint16_t>(((d_bits >> (4 * w)) & 0xf) << 12);
  std::memset(y->qh, 0, sizeof y->qh);
  for (int k = 0; k < 16; ++k) {  // half k % 2 of sub-block k / 2
    float inverse;
    const int ls = ScaleFor(step[k], d, &inverse);
    const int ib = k / 2;
    words[ib / 2] = static_cast<uint16_t>(words[ib / 2] | ls << (6 * (ib % 2) + 3 * (k % 2)));
    for (int g = 0; g < 2; ++g) {
      const int l = 2 * (k % 2) + g;
      const float* xg = x + 32 * ib + 8 * l;
      const int delta = DeltaSignFor(xg, 8, inverse);
      const int index = GroupIndex(xg, inverse, delta);
      y->qs[4 * ib + l] = static_cast<uint8_t>(index & 0xff);
      const int nibble = (index >> 8) | (delta < 0 ? 8 : 0);
      y->qh[2 * ib + l / 2] = static_cast<uint8_t>(y->qh[2 * ib + l / 2] | nibble << (4 * (l % 2)));
    }
  }
  std::memcpy(y->scales, words, sizeof words);
}

// ggml's dequantize_row_iq1_{s,m}: dl = d * (2 * ls + 1), value = dl * (grid + delta).
template <typename Block>
void DequantizeRowOf(const void* src, float* dst, int64_t n) {
  const auto* x = static_cast<const Block*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = SuperScale(x[i]);
    for (int ib = 0; ib < 8; ++ib) {
      Iq1SubBlock s;
      DecodeIq1SubBlock(x[i], ib, &s);
      for (int e = 0; e < 32; ++e) {
        const float dl = d * static_cast<float>(s.scale[e / 16]);
        const float delta = s.delta[e / 8] < 0 ? -kIq1Delta : kIq1Delta;
        dst[i * kQK_K + 32 * ib + e] = dl * (static_cast<float>(s.v[e]) + delta);
      }
    }
  }
}

}  // namespace

bool IsIq1Type(DType type) { return type == DType::kIQ1_S || type == DType::kIQ1_M; }

void DequantizeIq1Row(DType type, const void* src, float* dst, int64_t n) {
  COHORT_CHECK(IsIq1Type(type));
  if (type == DType::kIQ1_S) return DequantizeRowOf<BlockIq1S>(src, dst, n);
  DequantizeRowOf<BlockIq1M>(src, dst, n);
}

void QuantizeIq1Row(DType type, const float* src, void* dst, int64_t n) {
  COHORT_CHECK(IsIq1Type(type));
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    if (type == DType::kIQ1_S) {
      QuantizeIq1SBlock(src + i * kQK_K, static_cast<BlockIq1S*>(dst) + i);
    } else {
      QuantizeIq1MBlock(src + i * kQK_K, static_cast<BlockIq1M*>(dst) + i);
    }
  }
}

VecDotFn GetIq1VecDot(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotGeneric<BlockIq1S>;
  return weight == DType::kIQ1_M ? VecDotGeneric<BlockIq1M> : nullptr;
}
VecDotFn GetIq1X86OrderVecDot(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotIq1SX86;
  return weight == DType::kIQ1_M ? VecDotIq1MX86 : nullptr;
}
VecDotFn GetIq1X86OrderVecDotGrouped(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotPanel<BlockIq1S>;
  return weight == DType::kIQ1_M ? VecDotPanel<BlockIq1M> : nullptr;
}
VecDotFn GetIq1ArmOrderVecDot(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotArm<BlockIq1S>;
  return weight == DType::kIQ1_M ? VecDotArm<BlockIq1M> : nullptr;
}

}  // namespace cohort::kernels::ref
