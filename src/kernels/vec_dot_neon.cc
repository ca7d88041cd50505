// AArch64 kernels (NEON with the dot-product extension, Armv8.2-A and later: Apple M1 on,
// Graviton 2 on, Ampere Altra, Cortex-A76 on), chosen at run time where the CPU has sdot.
// The integer dot products of Q8_0/Q4_0 blocks and Q4_K/Q6_K sub-blocks use sdot (4 byte
// products summed into each int32 lane in one instruction); those sums are exact in any
// order, and every float step is the scalar reference's own expression in its order, so each
// result is the reference's to the bit (quant_ref_legacy.cc's VecDotBlocks, quant_ref_k.cc's
// VecDotK). Types without a kernel here use the reference.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// The exact sum of the products of 32 signed bytes x (two halves) and y.
COHORT_TARGET_DOTPROD inline int32_t Dot32(int8x16_t x0, int8x16_t x1, const int8_t* y) {
  int32x4_t s = vdotq_s32(vdupq_n_s32(0), x0, vld1q_s8(y));
  s = vdotq_s32(s, x1, vld1q_s8(y + 16));
  return vaddvq_s32(s);
}

COHORT_TARGET_DOTPROD inline int32_t Dot16(int8x16_t x, const int8_t* y) {
  return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), x, vld1q_s8(y)));
}

COHORT_TARGET_DOTPROD float VecDotQ8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const int32_t isum = Dot32(vld1q_s8(x[i].qs), vld1q_s8(x[i].qs + 16), y[i].qs);
    sumf += static_cast<float>(isum) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  return sumf;
}

// Q4_0: byte j holds element j (low nibble) and element j + 16 (high), each stored + 8.
COHORT_TARGET_DOTPROD float VecDotQ4_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  const int8x16_t eight = vdupq_n_s8(8);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8x16_t q = vld1q_u8(x[i].qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, low_mask)), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
    const int32_t isum = Dot32(lo, hi, y[i].qs);
    sumf += static_cast<float>(isum) * (Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d));
  }
  return sumf;
}

// Q4_K: 64-element chunk c is bytes 32c..32c+31 of qs, sub-block 2c in the low nibbles and
// 2c + 1 in the high ones; each sub-block has a 6-bit scale and min.
COHORT_TARGET_DOTPROD float VecDotQ4_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int scale[8], min[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(x[i].scales, j, &scale[j], &min[j]);
    int sumi = 0;
    for (int c = 0; c < 4; ++c) {
      const uint8x16_t q0 = vld1q_u8(x[i].qs + 32 * c);
      const uint8x16_t q1 = vld1q_u8(x[i].qs + 32 * c + 16);
      const int8_t* yq = y[i].qs + 64 * c;
      const int32_t lo = Dot32(vreinterpretq_s8_u8(vandq_u8(q0, low_mask)),
                               vreinterpretq_s8_u8(vandq_u8(q1, low_mask)), yq);
      const int32_t hi = Dot32(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), yq + 32);
      sumi += scale[2 * c] * lo + scale[2 * c + 1] * hi;
    }
    sumf += (Fp16ToFp32(x[i].d) * y[i].d) * static_cast<float>(sumi);
    // The mins multiply sums of 16 activation quants, which Q8_K carries precomputed.
    int summs = 0;
    for (int g = 0; g < kQK_K / 16; ++g) summs += y[i].bsums[g] * min[g / 2];
    sumf -= (Fp16ToFp32(x[i].dmin) * y[i].d) * static_cast<float>(summs);
  }
  return sumf;
}

// Q6_K: element 128h + 32g + l has its low 4 bits in ql[64h + 32(g & 1) + l] (the high
// nibble for g >= 2) and its high 2 bits at bit 2g of qh[32h + l]; stored + 32; one signed
// 8-bit scale per 16 elements.
COHORT_TARGET_DOTPROD float VecDotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const uint8x16_t low_mask = vdupq_n_u8(0x0f);
  const uint8x16_t two_bits = vdupq_n_u8(0x03);
  const int8x16_t bias = vdupq_n_s8(32);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi = 0;
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x[i].ql + 64 * h;
      const uint8x16_t qh[2] = {vld1q_u8(x[i].qh + 32 * h), vld1q_u8(x[i].qh + 32 * h + 16)};
      for (int g = 0; g < 4; ++g) {
        const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * g));  // a right shift by 2g
        for (int half = 0; half < 2; ++half) {  // elements l = 16 half .. 16 half + 15
          const uint8x16_t l4 = vld1q_u8(ql + 32 * (g & 1) + 16 * half);
          const uint8x16_t low = g >= 2 ? vshrq_n_u8(l4, 4) : vandq_u8(l4, low_mask);
          const uint8x16_t high = vandq_u8(vshlq_u8(qh[half], shift), two_bits);
          const int8x16_t q = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8(high, 4))), bias);
          const int e = 128 * h + 32 * g + 16 * half;
          sumi += x[i].scales[e / 16] * Dot16(q, y[i].qs + e);
        }
      }
    }
    sumf += (Fp16ToFp32(x[i].d) * y[i].d) * static_cast<float>(sumi);
  }
  return sumf;
}

}  // namespace

VecDotFn GetVecDot(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return VecDotQ4_0;
    case DType::kQ8_0: return VecDotQ8_0;
    case DType::kQ4_K: return VecDotQ4_K;
    case DType::kQ6_K: return VecDotQ6_K;
    default: return nullptr;
  }
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetVecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
