// The AArch64 (NEON dotprod) TQ1_0 / TQ2_0 x Q8_K vec-dots in llama.cpp's ARM order, bit for
// bit ref::GetTernaryArmOrderVecDot's: the digits 0..2 (the leading digit of each byte times
// 3^n by a halving add) sdot the activations, the block sums are subtracted, and each block
// adds its integer sum by one fma with d_w * d_a.
#include "kernels/quant_tq.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>
#include <cstddef>
#include <cstring>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// The leading base-3 digit of each byte q: (3 q) >> 8 = ((q + (q >> 1)) >> 1) >> 6.
inline int8x16_t LeadingDigits(uint8x16_t q) {
  return vreinterpretq_s8_u8(vshrq_n_u8(vhaddq_u8(q, vshrq_n_u8(q, 1)), 6));
}

COHORT_TARGET_DOTPROD inline int32x4_t DotDigits(int32x4_t acc, uint8x16_t q, uint8_t pow3, const int8_t* q8) {
  return vdotq_s32(acc, LeadingDigits(vmulq_u8(q, vdupq_n_u8(pow3))), vld1q_s8(q8));
}

// The block's integer sum less its 16 activation block sums, and the float step.
COHORT_TARGET_DOTPROD inline float AddBlock(int32x4_t sum, const BlockQ8_K& y, uint16_t d_w, float sumf) {
  // The packed struct's int16 fields are loaded as bytes (no alignment is promised).
  const auto* bsum_bytes = reinterpret_cast<const uint8_t*>(&y) + offsetof(BlockQ8_K, bsums);
  const int16x8_t bsums =
      vaddq_s16(vreinterpretq_s16_u8(vld1q_u8(bsum_bytes)), vreinterpretq_s16_u8(vld1q_u8(bsum_bytes + 16)));
  sum = vsubq_s32(sum, vpaddlq_s16(bsums));
  return std::fma(Fp16ToFp32(d_w) * y.d, static_cast<float>(vaddvq_s32(sum)), sumf);
}

COHORT_TARGET_DOTPROD float VecDotTq1(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockTq1_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  static constexpr uint8_t kQhPow3[16] = {1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27};
  const uint8x16_t qh_pow3 = vld1q_u8(kQhPow3);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    int32x4_t sum = vdupq_n_s32(0);
    const uint8x16_t head0 = vld1q_u8(x[i].qs), head1 = vld1q_u8(x[i].qs + 16);
    uint8_t pow3 = 1;
    for (int d = 0; d < 5; ++d, pow3 = static_cast<uint8_t>(pow3 * 3)) {
      sum = DotDigits(sum, head0, pow3, q8 + 32 * d);
      sum = DotDigits(sum, head1, pow3, q8 + 32 * d + 16);
    }
    const uint8x16_t tail = vld1q_u8(x[i].qs + 32);
    pow3 = 1;
    for (int d = 0; d < 5; ++d, pow3 = static_cast<uint8_t>(pow3 * 3)) {
      sum = DotDigits(sum, tail, pow3, q8 + 160 + 16 * d);
    }
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    sum = DotDigits(sum, vmulq_u8(vreinterpretq_u8_u32(vdupq_n_u32(qh)), qh_pow3), 1, q8 + 240);
    sumf = AddBlock(sum, y[i], x[i].d, sumf);
  }
  return sumf;
}

COHORT_TARGET_DOTPROD float VecDotTq2(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockTq2_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const uint8x16_t mask = vdupq_n_u8(3);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t sum = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {  // 16 bytes each: values 128 (c / 2) + 16 (c % 2) + 32 l + k
      const uint8x16_t bits = vld1q_u8(x[i].qs + 16 * c);
      const int8_t* q8 = y[i].qs + 128 * (c / 2) + 16 * (c % 2);
      sum = vdotq_s32(sum, vreinterpretq_s8_u8(vandq_u8(bits, mask)), vld1q_s8(q8));
      sum = vdotq_s32(sum, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bits, 2), mask)), vld1q_s8(q8 + 32));
      sum = vdotq_s32(sum, vreinterpretq_s8_u8(vandq_u8(vshrq_n_u8(bits, 4), mask)), vld1q_s8(q8 + 64));
      sum = vdotq_s32(sum, vreinterpretq_s8_u8(vshrq_n_u8(bits, 6)), vld1q_s8(q8 + 96));
    }
    sumf = AddBlock(sum, y[i], x[i].d, sumf);
  }
  return sumf;
}

}  // namespace

VecDotFn GetTernaryVecDot(DType weight) {
  if (weight == DType::kTQ1_0) return VecDotTq1;
  return weight == DType::kTQ2_0 ? VecDotTq2 : nullptr;
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetTernaryVecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
