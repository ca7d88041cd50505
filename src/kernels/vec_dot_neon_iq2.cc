// The AArch64 (NEON dotprod) IQ2_XXS x Q8_K vec-dot in llama.cpp's ARM order, bit for bit
// ref::GetIqGridArmOrderVecDot's: the grid bytes times their +1/-1 signs (true values), sdot with
// the activations, per sub-block one float fma by (0.5 + ls) into the even or odd sum, per
// super-block one fma by d_w * d_a, the total times 1/4.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// The integer dot of sub-block ib32 with its 32 activations, and its (0.5 + ls).
COHORT_TARGET_DOTPROD inline int SubBlockDot(const BlockIq2Xxs& b, int ib32, const int8_t* q8, float* ls) {
  const Iq2XxsWords w = Iq2XxsSubBlock(b, ib32);
  const auto grid = [&](int l) { return vcreate_s8(kIq2XxsGrid[(w.grid >> (8 * l)) & 0xff]); };
  const auto signs = [&](int l) { return vcreate_s8(kIq2SignBytes.bytes[(w.signs >> (7 * l)) & 127]); };
  const int8x16_t v0 = vmulq_s8(vcombine_s8(grid(0), grid(1)), vcombine_s8(signs(0), signs(1)));
  const int8x16_t v1 = vmulq_s8(vcombine_s8(grid(2), grid(3)), vcombine_s8(signs(2), signs(3)));
  const int32x4_t dot = vdotq_s32(vdotq_s32(vdupq_n_s32(0), v0, vld1q_s8(q8)), v1, vld1q_s8(q8 + 16));
  *ls = 0.5f + static_cast<float>(w.signs >> 28);
  return vaddvq_s32(dot);
}

COHORT_TARGET_DOTPROD float VecDotIq2Xxs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    float sum1 = 0, sum2 = 0;
    for (int ib = 0; ib < 8; ib += 2) {
      float ls1, ls2;
      const int p1 = SubBlockDot(x[i], ib, y[i].qs + 32 * ib, &ls1);
      const int p2 = SubBlockDot(x[i], ib + 1, y[i].qs + 32 * ib + 32, &ls2);
      sum1 = std::fma(static_cast<float>(p1), ls1, sum1);
      sum2 = std::fma(static_cast<float>(p2), ls2, sum2);
    }
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, sum1 + sum2, sumf);
  }
  return 0.25f * sumf;
}

}  // namespace

VecDotFn GetIqGridVecDot(DType weight) {
  if (VecDotFn fn = GetIq1VecDot(weight)) return fn;
  return weight == DType::kIQ2_XXS ? VecDotIq2Xxs : GetIq2sVecDot(weight);
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetIqGridVecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
