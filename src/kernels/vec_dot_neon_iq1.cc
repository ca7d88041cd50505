// The AArch64 (NEON dotprod) IQ1_S and IQ1_M x Q8_K vec-dots in llama.cpp's ARM order, bit for
// bit ref::GetIq1ArmOrderVecDot's: sdot of the grid bytes (true values) with the activations,
// the super-block's grid and delta sums as integers (IQ1_S's delta part from the Q8_K block
// sums, IQ1_M's by sdot with +1/-1 bytes), joined as fma(1/8, delta sum, grid sum), and one fma
// by d_a * d_w per super-block.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/iq1_grids.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// Half h (values 16h .. 16h + 15) of sub-block ib: its grid bytes, and its delta signs as bytes.
template <typename Block>
COHORT_TARGET_DOTPROD inline int8x16_t GridHalf(const Block& b, int ib, int h) {
  return vcombine_s8(vcreate_s8(Iq1GridWord(b, ib, 2 * h)), vcreate_s8(Iq1GridWord(b, ib, 2 * h + 1)));
}
template <typename Block>
COHORT_TARGET_DOTPROD inline int8x16_t DeltaHalf(const Block& b, int ib, int h) {
  return vcombine_s8(vdup_n_s8(static_cast<int8_t>(Iq1DeltaSign(b, ib, 2 * h))),
                     vdup_n_s8(static_cast<int8_t>(Iq1DeltaSign(b, ib, 2 * h + 1))));
}

COHORT_TARGET_DOTPROD inline int Dot16(int8x16_t v, const int8_t* q8) {
  return vaddvq_s32(vdotq_s32(vdupq_n_s32(0), v, vld1q_s8(q8)));
}

COHORT_TARGET_DOTPROD float VecDotIq1S(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int grid = 0, delta = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const int8_t* q8 = y[i].qs + 32 * ib;
      const int32x4_t dot = vdotq_s32(vdotq_s32(vdupq_n_s32(0), GridHalf(x[i], ib, 0), vld1q_s8(q8)),
                                      GridHalf(x[i], ib, 1), vld1q_s8(q8 + 16));
      const int ls = Iq1SScale(x[i], ib);
      grid += vaddvq_s32(dot) * ls;
      delta += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * ls * Iq1SDeltaSign(x[i], ib);
    }
    const float joined = std::fma(kIq1Delta, static_cast<float>(delta), static_cast<float>(grid));
    sumf = std::fma(y[i].d * Fp16ToFp32(x[i].d), joined, sumf);
  }
  return sumf;
}

COHORT_TARGET_DOTPROD float VecDotIq1M(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1M*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int grid = 0, delta = 0;
    for (int ib = 0; ib < 8; ++ib) {
      for (int h = 0; h < 2; ++h) {
        const int8_t* q8 = y[i].qs + 32 * ib + 16 * h;
        const int scale = Iq1MScale(x[i], ib, h);
        grid += Dot16(GridHalf(x[i], ib, h), q8) * scale;
        delta += Dot16(DeltaHalf(x[i], ib, h), q8) * scale;
      }
    }
    const float joined = std::fma(kIq1Delta, static_cast<float>(delta), static_cast<float>(grid));
    sumf = std::fma(y[i].d * Fp16ToFp32(Iq1MSuperScale(x[i])), joined, sumf);
  }
  return sumf;
}

}  // namespace

VecDotFn GetIq1VecDot(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotIq1S;
  return weight == DType::kIQ1_M ? VecDotIq1M : nullptr;
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetIq1VecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
