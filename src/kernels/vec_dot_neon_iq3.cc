// The AArch64 (NEON dotprod) IQ3_XXS and IQ3_S x Q8_K vec-dots in llama.cpp's ARM orders, bit
// for bit ref::GetIq3ArmOrderVecDot's: the grid bytes times their +1/-1 signs (true values),
// sdot with the activations; IQ3_XXS per sub-block one float fma by (0.5 + ls) into the even or
// odd sum, per super-block one fma by d_w * d_a, the total times 1/2; IQ3_S integer sums scaled
// by 2 * ls + 1 and one fma by d_w * d_a per super-block.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/iq3_grids.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// 16 values from 4 grid entries and 2 sign multiplier words (8 values each).
COHORT_TARGET_DOTPROD inline int8x16_t Signed16(uint32_t g0, uint32_t g1, uint32_t g2, uint32_t g3, uint64_t s0,
                                                uint64_t s1) {
  const uint32_t grid[4] = {g0, g1, g2, g3};
  return vmulq_s8(vreinterpretq_s8_u32(vld1q_u32(grid)), vcombine_s8(vcreate_s8(s0), vcreate_s8(s1)));
}

// The integer dot of an IQ3_XXS sub-block with its 32 activations, and its ls.
COHORT_TARGET_DOTPROD inline int SubBlockDot(const BlockIq3Xxs& b, int ib32, const int8_t* q8, uint32_t* ls) {
  const Iq3XxsSubBlockBits s = Iq3XxsSubBlock(b, ib32);
  const auto g = [&](int k) { return kIq3XxsGrid[s.grid[k]]; };
  const auto sg = [&](int l) { return kIq2SignBytes.bytes[(s.signs >> (7 * l)) & 127]; };
  const int8x16_t v0 = Signed16(g(0), g(1), g(2), g(3), sg(0), sg(1));
  const int8x16_t v1 = Signed16(g(4), g(5), g(6), g(7), sg(2), sg(3));
  *ls = s.signs >> 28;
  return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), v0, vld1q_s8(q8)), v1, vld1q_s8(q8 + 16)));
}

// The same for IQ3_S, with its scale 2 * ls + 1.
COHORT_TARGET_DOTPROD inline int SubBlockDot(const BlockIq3S& b, int ib32, const int8_t* q8, uint32_t* scale) {
  const auto g = [&](int k) { return kIq3SGrid[Iq3SIndex(b, ib32, k)]; };
  const auto sg = [&](int l) { return kIq3SSignBytes.bytes[b.signs[4 * ib32 + l]]; };
  const int8x16_t v0 = Signed16(g(0), g(1), g(2), g(3), sg(0), sg(1));
  const int8x16_t v1 = Signed16(g(4), g(5), g(6), g(7), sg(2), sg(3));
  *scale = static_cast<uint32_t>(2 * Iq3SScale(b, ib32) + 1);
  return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), v0, vld1q_s8(q8)), v1, vld1q_s8(q8 + 16)));
}

COHORT_TARGET_DOTPROD float VecDotIq3Xxs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq3Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    float sum1 = 0, sum2 = 0;
    for (int ib = 0; ib < 8; ib += 2) {
      uint32_t ls1, ls2;
      const int p1 = SubBlockDot(x[i], ib, y[i].qs + 32 * ib, &ls1);
      const int p2 = SubBlockDot(x[i], ib + 1, y[i].qs + 32 * ib + 32, &ls2);
      sum1 = std::fma(static_cast<float>(p1), 0.5f + static_cast<float>(ls1), sum1);
      sum2 = std::fma(static_cast<float>(p2), 0.5f + static_cast<float>(ls2), sum2);
    }
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, sum1 + sum2, sumf);
  }
  return 0.5f * sumf;
}

COHORT_TARGET_DOTPROD float VecDotIq3S(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq3S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sumi1 = 0, sumi2 = 0;
    for (int ib = 0; ib < 8; ib += 2) {
      uint32_t s1, s2;
      const int p1 = SubBlockDot(x[i], ib, y[i].qs + 32 * ib, &s1);
      const int p2 = SubBlockDot(x[i], ib + 1, y[i].qs + 32 * ib + 32, &s2);
      sumi1 += p1 * static_cast<int>(s1);
      sumi2 += p2 * static_cast<int>(s2);
    }
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, static_cast<float>(sumi1 + sumi2), sumf);
  }
  return sumf;
}

}  // namespace

VecDotFn GetIq3VecDot(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotIq3Xxs;
  return weight == DType::kIQ3_S ? VecDotIq3S : nullptr;
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetIq3VecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
