// The AArch64 (NEON dotprod) IQ4_NL and IQ4_XS vec-dots, in llama.cpp's x86 order like the
// other NEON kernels (vec_dot_neon.cc), so llama.cpp's x86 goldens hold on ARM too: the same
// exact integer sums in the same lanes (sdot's lane m sums values 4m..4m+3, as maddubs+madd
// does), the same float steps (ref::GetIqX86OrderVecDot's), and for IQ4_XS x86's 8-bit sign
// move of the activation (a -128 against a negative weight wraps, as there).
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// Sum of |w| * (a with w's sign), 16 values into 4 lanes (lane m: values 4m..4m+3).
COHORT_TARGET_DOTPROD inline int32x4_t DotMoved(int32x4_t acc, int8x16_t w, int8x16_t a) {
  const int8x16_t moved = vbslq_s8(vcltzq_s8(w), vnegq_s8(a), a);
  return vdotq_s32(acc, vabsq_s8(w), moved);
}

COHORT_TARGET_DOTPROD float VecDotIq4Nl(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const int8x16_t table = vld1q_s8(kIq4NlValues);
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint8x16_t bits = vld1q_u8(x[i].qs);
    const int8x16_t lo = vqtbl1q_s8(table, vandq_u8(bits, mask));
    const int8x16_t hi = vqtbl1q_s8(table, vshrq_n_u8(bits, 4));
    int32x4_t s = vdotq_s32(vdupq_n_s32(0), lo, vld1q_s8(y[i].qs));
    s = vdotq_s32(s, hi, vld1q_s8(y[i].qs + 16));
    acc = std::fma(static_cast<float>(vaddvq_s32(s)), Fp16ToFp32(x[i].d) * Fp16ToFp32(y[i].d), acc);
  }
  return acc;
}

COHORT_TARGET_DOTPROD float VecDotIq4Xs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int8x16_t table = vld1q_s8(kIq4NlValues);
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  float32x4_t acc_lo = vdupq_n_f32(0), acc_hi = vdupq_n_f32(0);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t sum_lo = vdupq_n_s32(0), sum_hi = vdupq_n_s32(0);  // x86's lanes 0-3 and 4-7
    for (int ib = 0; ib < 8; ++ib) {
      const uint8x16_t bits = vld1q_u8(x[i].qs + 16 * ib);
      const int8_t* q8 = y[i].qs + 32 * ib;
      const int32x4_t lo = DotMoved(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(bits, mask)), vld1q_s8(q8));
      const int32x4_t hi = DotMoved(vdupq_n_s32(0), vqtbl1q_s8(table, vshrq_n_u8(bits, 4)), vld1q_s8(q8 + 16));
      const int scale = Iq4XsScale(x[i], ib);
      sum_lo = vmlaq_n_s32(sum_lo, lo, scale);
      sum_hi = vmlaq_n_s32(sum_hi, hi, scale);
    }
    const float32x4_t d = vdupq_n_f32(Fp16ToFp32(x[i].d) * y[i].d);
    acc_lo = vfmaq_f32(acc_lo, d, vcvtq_f32_s32(sum_lo));
    acc_hi = vfmaq_f32(acc_hi, d, vcvtq_f32_s32(sum_hi));
  }
  // x86's HorizontalSum: lanes m and m + 4, then (0 + 2) + (1 + 3).
  const float32x4_t s = vaddq_f32(acc_lo, acc_hi);
  return (vgetq_lane_f32(s, 0) + vgetq_lane_f32(s, 2)) + (vgetq_lane_f32(s, 1) + vgetq_lane_f32(s, 3));
}

// Batches of >= 8 tokens (ref's VecDotIq4XsPanel): true products, one float step per super-block.
COHORT_TARGET_DOTPROD float VecDotIq4XsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const int8x16_t table = vld1q_s8(kIq4NlValues);
  const uint8x16_t mask = vdupq_n_u8(0x0f);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int32x4_t sum = vdupq_n_s32(0);
    for (int ib = 0; ib < 8; ++ib) {
      const uint8x16_t bits = vld1q_u8(x[i].qs + 16 * ib);
      const int8_t* q8 = y[i].qs + 32 * ib;
      int32x4_t s = vdotq_s32(vdupq_n_s32(0), vqtbl1q_s8(table, vandq_u8(bits, mask)), vld1q_s8(q8));
      s = vdotq_s32(s, vqtbl1q_s8(table, vshrq_n_u8(bits, 4)), vld1q_s8(q8 + 16));
      sum = vmlaq_n_s32(sum, s, Iq4XsScale(x[i], ib));
    }
    acc = std::fma(static_cast<float>(vaddvq_s32(sum)), Fp16ToFp32(x[i].d) * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIqVecDotGrouped(DType weight) {
  return weight == DType::kIQ4_XS ? VecDotIq4XsPanel : GetIqVecDot(weight);
}

VecDotFn GetIqVecDot(DType weight) {
  if (VecDotFn fn = GetIq3VecDot(weight)) return fn;
  switch (weight) {
    case DType::kIQ4_NL: return VecDotIq4Nl;
    case DType::kIQ4_XS: return VecDotIq4Xs;
    default: return GetIqGridVecDot(weight);
  }
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetIqVecDot(DType) { return nullptr; }
VecDotFn GetIqVecDotGrouped(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
