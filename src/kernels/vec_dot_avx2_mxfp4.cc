// The AVX2 MXFP4 x Q8_0 vec-dot. On AVX2 machines llama.cpp repacks MXFP4 matrices whose row
// count is a multiple of 8 (every gpt-oss matrix, the experts included) and multiplies them
// with its mxfp4_8x8 GEMV/GEMM, single token or batch alike: each block's whole integer sum is
// scaled and added to one float per row, block after block. This kernel computes that order
// (ref::VecDotMxfp4Q8_0Repacked's, bit for bit), with the nibbles looked up in the doubled
// e2m1 table by one byte shuffle.
#include <cmath>

#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

COHORT_TARGET_AVX2 float VecDotMxfp4(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockMxfp4*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values)));
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i qx = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs));
    const int sum = x86::HorizontalSum(x86::DotSignedBytes(qx, x86::Load32(y[i].qs)));
    acc = std::fma(static_cast<float>(sum), Mxfp4HalfScale(x[i].e) * x86::HalfToFloat(y[i].d), acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetMxfp4VecDot() { return VecDotMxfp4; }

#else

VecDotFn GetMxfp4VecDot() { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
