// The AArch64 (NEON dotprod) IQ2_XS and IQ2_S x Q8_K vec-dots in llama.cpp's ARM order, bit for
// bit ref::GetIq2sArmOrderVecDot's: the grid bytes times their +1/-1 signs (true values), sdot
// with the activations per 16 values, times their scale into the super-block's integer sum
// (exact, so the order of its terms does not matter), one fma by d_w * d_a per super-block, the
// total times 1/8.
#include "kernels/quant_internal.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include <cmath>

#include "core/fp16.h"
#include "kernels/iq2_grids_xs.h"
#include "kernels/quant_blocks.h"

#define COHORT_TARGET_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace cohort::kernels::neon {
namespace {

// The integer dot of a sub-block with its 32 activations, each 16 values times their scale.
COHORT_TARGET_DOTPROD inline int SubBlockDot(const Iq2SubBlock& s, const int8_t* q8) {
  const auto grid = [&](int l) { return vcreate_s8(s.grid[l]); };
  const auto signs = [&](int l) { return vcreate_s8(kIq2FullSignBytes.bytes[s.signs[l]]); };
  const int8x16_t v0 = vmulq_s8(vcombine_s8(grid(0), grid(1)), vcombine_s8(signs(0), signs(1)));
  const int8x16_t v1 = vmulq_s8(vcombine_s8(grid(2), grid(3)), vcombine_s8(signs(2), signs(3)));
  const int32x4_t dot0 = vdotq_s32(vdupq_n_s32(0), v0, vld1q_s8(q8));
  const int32x4_t dot1 = vdotq_s32(vdupq_n_s32(0), v1, vld1q_s8(q8 + 16));
  return vaddvq_s32(dot0) * s.scale[0] + vaddvq_s32(dot1) * s.scale[1];
}

template <typename Block, Iq2SubBlock (*kSubBlock)(const Block&, int)>
COHORT_TARGET_DOTPROD float VecDot(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float sumf = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sum = 0;
    for (int ib = 0; ib < 8; ++ib) sum += SubBlockDot(kSubBlock(x[i], ib), y[i].qs + 32 * ib);
    sumf = std::fma(Fp16ToFp32(x[i].d) * y[i].d, static_cast<float>(sum), sumf);
  }
  return 0.125f * sumf;
}

}  // namespace

VecDotFn GetIq2sVecDot(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDot<BlockIq2Xs, Iq2XsSubBlock>;
  return weight == DType::kIQ2_S ? VecDot<BlockIq2S, Iq2SSubBlock> : nullptr;
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
VecDotFn GetIq2sVecDot(DType) { return nullptr; }
}  // namespace cohort::kernels::neon

#endif
