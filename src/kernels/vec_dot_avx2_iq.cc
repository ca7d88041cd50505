// The AVX2 IQ4_NL x Q8_0 and IQ4_XS x Q8_K vec-dots, in the order of llama.cpp's x86 backend
// (ref::GetIqX86OrderVecDot's, bit for bit): the 4-bit indices become table values by one byte
// shuffle, then IQ4_NL adds each block's integer sum into one float (the repacked iq4_nl_8x8
// order) and IQ4_XS keeps 8 float lanes per super-block (ggml_vec_dot_iq4_xs_q8_K's AVX2 code).
#include <cmath>

#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

COHORT_TARGET_AVX2 inline __m256i Table() {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
}

COHORT_TARGET_AVX2 float VecDotIq4Nl(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const __m256i table = Table();
  const int64_t nb = n / kQK;
  float acc = 0.0f;
  int64_t i = 0;
  // Two blocks' integer sums at a time (independent), then their two dependent float steps.
  for (; i + 2 <= nb; i += 2) {
    const __m256i q0 = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs));
    const __m256i q1 = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i + 1].qs));
    const int s0 = x86::HorizontalSum(x86::DotSignedBytes(q0, x86::Load32(y[i].qs)));
    const int s1 = x86::HorizontalSum(x86::DotSignedBytes(q1, x86::Load32(y[i + 1].qs)));
    acc = std::fma(static_cast<float>(s0), x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d), acc);
    acc = std::fma(static_cast<float>(s1), x86::HalfToFloat(x[i + 1].d) * x86::HalfToFloat(y[i + 1].d), acc);
  }
  if (i < nb) {
    const __m256i q = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs));
    const int s = x86::HorizontalSum(x86::DotSignedBytes(q, x86::Load32(y[i].qs)));
    acc = std::fma(static_cast<float>(s), x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d), acc);
  }
  return acc;
}

// As ggml: maddubs(|w|, sign(q, w)) pairs, madd by the sub-block scale, lanes summed as ints.
// The 8-bit sign move is ggml's too (ref's X86Product: q = -128 wraps).
COHORT_TARGET_AVX2 float VecDotIq4Xs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i table = Table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum1 = _mm256_setzero_si256(), sum2 = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ib += 2) {
      const __m256i q1 = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs + 16 * ib));
      const __m256i q2 = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs + 16 * ib + 16));
      const __m256i a1 = x86::Load32(y[i].qs + 32 * ib);
      const __m256i a2 = x86::Load32(y[i].qs + 32 * ib + 32);
      const __m256i p1 = _mm256_maddubs_epi16(_mm256_sign_epi8(q1, q1), _mm256_sign_epi8(a1, q1));
      const __m256i p2 = _mm256_maddubs_epi16(_mm256_sign_epi8(q2, q2), _mm256_sign_epi8(a2, q2));
      sum1 = _mm256_add_epi32(_mm256_madd_epi16(p1, _mm256_set1_epi16(static_cast<int16_t>(Iq4XsScale(x[i], ib)))), sum1);
      sum2 = _mm256_add_epi32(_mm256_madd_epi16(p2, _mm256_set1_epi16(static_cast<int16_t>(Iq4XsScale(x[i], ib + 1)))), sum2);
    }
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_add_epi32(sum1, sum2)), acc);
  }
  return x86::HorizontalSum(acc);
}

// Batches of >= 8 tokens (ref's VecDotIq4XsPanel): each super-block's integer sum with true
// products (the activation's sign moved onto the weight: |a| <= 128 unsigned cannot wrap),
// then one float fused multiply-add.
COHORT_TARGET_AVX2 float VecDotIq4XsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i table = Table();
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i q = _mm256_shuffle_epi8(table, x86::UnpackNibbles16(x[i].qs + 16 * ib));
      const __m256i dot = x86::DotSignedBytes(x86::Load32(y[i].qs + 32 * ib), q);
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, _mm256_set1_epi32(Iq4XsScale(x[i], ib))));
    }
    acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), x86::HalfToFloat(x[i].d) * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIqVecDotGrouped(DType weight) {
  if (VecDotFn fn = GetIq3VecDotGrouped(weight)) return fn;
  if (weight == DType::kIQ4_XS) return VecDotIq4XsPanel;
  if (VecDotFn fn = GetIqGridVecDotGrouped(weight)) return fn;
  return GetIqVecDot(weight);
}

VecDotFn GetIqVecDot(DType weight) {
  if (VecDotFn fn = GetIq3VecDot(weight)) return fn;
  switch (weight) {
    case DType::kIQ4_NL: return VecDotIq4Nl;
    case DType::kIQ4_XS: return VecDotIq4Xs;
    default: return GetIqGridVecDot(weight);
  }
}

#else

VecDotFn GetIqVecDot(DType) { return nullptr; }
VecDotFn GetIqVecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
