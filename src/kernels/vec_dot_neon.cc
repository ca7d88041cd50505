// AArch64 kernels (NEON with the dot-product extension, Armv8.2-A and later: Apple M1 on,
// Graviton 2 on, Ampere Altra, Cortex-A76 on), chosen at run time where the CPU has sdot.
// Each computes what the x86 kernels compute, to the bit: the same exact integer sums in the
// same lanes (sdot's lane m sums bytes 4m..4m+3, as dpbusd's and maddubs+madd's do), then
// the same float steps in the same order (vec_dot_avx512.cc, vec_dot_avx2_k.cc), which are
// llama.cpp's on x86. So a model's logits on ARM are its logits on x86, and llama.cpp's
// goldens hold exactly on both. Types without a kernel here use the scalar reference.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// x86::HorizontalSum's order: lanes m and m + 4, then lanes 0 + 2 and 1 + 3, then those two.
COHORT_TARGET_DOTPROD inline float HorizontalSum(float32x4_t lo, float32x4_t hi) {
  const float32x4_t s = vaddq_f32(lo, hi);
  const float a = vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2);
  const float b = vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3);
  return a + b;
}

// The exact sum of the products of 32 signed bytes x (two halves) and y.
COHORT_TARGET_DOTPROD inline int32_t Dot32(int8x16_t x0, int8x16_t x1, const int8_t* y) {
  int32x4_t s = vdotq_s32(vdupq_n_s32(0), x0, vld1q_s8(y));
  s = vdotq_s32(s, x1, vld1q_s8(y + 16));
  return vaddvq_s32(s);
}

// Q8_0 as vec_dot_avx512.cc's DotQ8_0Blocks (ggml's AVX order): 8 int32 lanes per block, lane
// m the products of bytes 4m..4m+3, each into its float lane by acc = fma(d, sum, acc).
COHORT_TARGET_DOTPROD float VecDotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d);
    const int32x4_t lo = vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[i].qs), vld1q_s8(y[i].qs));
    const int32x4_t hi = vdotq_s32(vdupq_n_s32(0), vld1q_s8(x[i].qs + 16), vld1q_s8(y[i].qs + 16));
    acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(lo), d);
    acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(hi), d);
  }
  return HorizontalSum(acc_lo, acc_hi);
}

// Q4_0 as vec_dot_avx512.cc's VecDotQ4_0 (llama.cpp's repacked q4_0 order): one float
// accumulator fed each block's whole integer sum by an FMA. Byte j holds element j (low
// nibble) and element j + 16 (high), each stored + 8.
COHORT_TARGET_DOTPROD float VecDotQ4_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d);
    const uint8x16_t q = vld1q_u8(x[i].qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low_mask)), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
    acc = std::fma(static_cast<float>(Dot32(lo, hi, y[i].qs)), d, acc);
  }
  return acc;
}

// Q4_K as vec_dot_avx2_k.cc's VecDotQ4_KRepacked (llama.cpp's q4_K_8x8 order): two float
// accumulators fed whole integer sums, once per super-block (GEMV) or, kPerPair, once per
// pair of sub-blocks (GEMM). 64-element chunk c is bytes 32c..32c+31 of qs, sub-block 2c in
// the low nibbles and 2c + 1 in the high ones.
template <bool kPerPair>
COHORT_TARGET_DOTPROD float VecDotQ4_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  float acc = 0, acc_min = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(x[i].scales, j, &sc[j], &mn[j]);
    const float yd = y[i].d;
    const float d = Fp16ToFp32(x[i].d) * yd;
    const float dmin = Fp16ToFp32(x[i].dmin) * yd;
    int sum = 0, min_sum = 0;
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * c);
      const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * c + 16);
      const int8_t* yq = y[i].qs + 64 * c;
      const int32_t lo = Dot32(vreinterpretq_s8_u8(vandq_u8(q0, low_mask)),
                               vreinterpretq_s8_u8(vandq_u8(q1, low_mask)), yq);
      const int32_t hi = Dot32(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), yq + 32);
      sum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
      const int pair_min = Q4KPairMinSum(y[i], mn, c);
      if constexpr (kPerPair) {
        acc = std::fma(static_cast<float>(sum), d, acc);
        acc_min = std::fma(static_cast<float>(pair_min), dmin, acc_min);
        sum = 0;
      } else {
        min_sum += pair_min;
      }
    }
    if constexpr (!kPerPair) {
      acc = std::fma(static_cast<float>(sum), d, acc);
      acc_min = std::fma(static_cast<float>(min_sum), dmin, acc_min);
    }
  }
  return acc - acc_min;
}

// Q6_K as vec_dot_avx2_k.cc's VecDotQ6_K (ggml's AVX2 order): 8 int32 lanes per super-block,
// lane m the scaled products u * y of bytes 4m..4m+3 of every 32-element group (u = q + 32,
// in [0, 64)), less 32 * (bsums[2m] * s[2m] + bsums[2m+1] * s[2m+1]); then one FMA per lane
// and super-block. Element 128h + 32g + l has its low 4 bits in ql[64h + 32(g & 1) + l] (the
// high nibble for g >= 2) and its high 2 bits at bit 2g of qh[32h + l].
COHORT_TARGET_DOTPROD float VecDotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  const uint8x16_t two_bits = vdupq_n_u8(0x03);
  float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};  // lanes 0..3, 4..7
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8x16_t qh[2] = {vld1q_u8(x[i].qh + 32 * h), vld1q_u8(x[i].qh + 32 * h + 16)};
      for (int g = 0; g < 4; ++g) {
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * g));  // a right shift by 2g
        const int8_t* s = x[i].scales + 8 * h + 2 * g;  // elements 0..15 of the group, 16..31
        for (int half = 0; half < 2; ++half) {
          const uint8x16_t l4 = vld1q_u8(ql + 32 * (g & 1) + 16 * half);
          const uint8x16_t low = g >= 2 ? vshrq_n_u8(l4, 4) : vandq_u8(l4, low_mask);
          const uint8x16_t high = vandq_u8(vshlq_u8(qh[half], shift), two_bits);
          const int8x16_t u = vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8(high, 4)));
          const int32x4_t dot = vdotq_s32(vdupq_n_s32(0), u, vld1q_s8(y[i].qs + 128 * h + 32 * g + 16 * half));
          sum[half] = vmlaq_n_s32(sum[half], dot, s[half]);
        }
      }
    }
    int32_t bias[8];
    for (int m = 0; m < 8; ++m) {
      bias[m] = 32 * (y[i].bsums[2 * m] * x[i].scales[2 * m] + y[i].bsums[2 * m + 1] * x[i].scales[2 * m + 1]);
    }
    const float d = y[i].d * Fp16ToFp32(x[i].d);
    acc_lo = vfmaq_n_f32(acc_lo, vcvtq_f32_s32(vsubq_s32(sum[0], vld1q_s32(bias))), d);
    acc_hi = vfmaq_n_f32(acc_hi, vcvtq_f32_s32(vsubq_s32(sum[1], vld1q_s32(bias + 4))), d);
  }
  return HorizontalSum(acc_lo, acc_hi);
}

}  // namespace

VecDotFn GetVecDot(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return VecDotQ4_0;
    case DType::kQ8_0: return VecDotQ8_0;
    case DType::kQ4_K: return VecDotQ4_K<false>;
    case DType::kQ6_K: return VecDotQ6_K;
    default: return nullptr;
  }
}

VecDotFn GetVecDotGrouped(DType weight) {
  return weight == DType::kQ4_K ? VecDotQ4_K<true> : GetVecDot(weight);
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetVecDot(DType) { return nullptr; }
VecDotFn GetVecDotGrouped(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
