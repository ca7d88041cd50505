// The panel GEMM of the i-quants (iq_panel.h) at the AVX2 and AVX-VNNI levels: the AVX-512
// kernel's sums with 8 rows as the 8 lanes of a ymm register, the panel's 16 rows in two passes.
// Per sub-block of 16 values and token: with AVX-VNNI four dpbusd of the rows' value + 128
// seeded with -128 x the sub-block's activation sum, as at AVX-512; without it, the value's
// sign moved onto the token's bytes and maddubs of |value| (|value|, |activation| <= 127, so
// the pair sums cannot saturate), widened by a madd that multiplies by the scale too. Both are the exact integer dot, times the
// rows' iscales and summed over the super-block: then one fma per super-block, as the reference.
#include <algorithm>
#include <cstring>

#include "kernels/iq_panel.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// At most 4 tokens a pass: their dot, sum and accumulator registers stay in the 16 ymm.
constexpr int kMaxTokens = 4;

namespace plain {
inline constexpr bool kVnni = false;
#define COHORT_PANEL_TARGET __attribute__((target("avx2,fma,f16c")))
#include "kernels/iq_panel_avx2_body.h"
#undef COHORT_PANEL_TARGET
}  // namespace plain

namespace vnni {
inline constexpr bool kVnni = true;
#define COHORT_PANEL_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#include "kernels/iq_panel_avx2_body.h"
#undef COHORT_PANEL_TARGET
}  // namespace vnni

using PanelDotFn = void (*)(const uint8_t*, const BlockQ8_K* const*, int64_t, float*, int64_t);
constexpr PanelDotFn kPlain[kMaxTokens] = {plain::PanelDot<1>, plain::PanelDot<2>, plain::PanelDot<3>,
                                           plain::PanelDot<4>};
constexpr PanelDotFn kVnniDots[kMaxTokens] = {vnni::PanelDot<1>, vnni::PanelDot<2>, vnni::PanelDot<3>,
                                              vnni::PanelDot<4>};

}  // namespace

void IqPanelDot(const uint8_t* panel, const uint8_t* act, int64_t act_stride, int n_tokens, int64_t n, float* out,
                int64_t out_stride, bool vnni) {
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int tokens = std::min(kMaxTokens, n_tokens - t0);
    const BlockQ8_K* y[kMaxTokens];
    for (int t = 0; t < tokens; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + (t0 + t) * act_stride);
    (vnni ? kVnniDots : kPlain)[tokens - 1](panel, y, n, out + t0 * out_stride, out_stride);
  }
}

#else

void IqPanelDot(const uint8_t*, const uint8_t*, int64_t, int, int64_t, float*, int64_t, bool) {}

#endif

}  // namespace cohort::kernels::avx2
