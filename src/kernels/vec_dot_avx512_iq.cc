// The AVX-512 (VNNI) IQ4_NL and IQ4_XS vec-dots: two 32-value (sub-)blocks per 512-bit
// register, their products summed by one vpdpbusd (|w| unsigned times the activation with w's
// sign moved onto it in 8 bits, exactly as AVX2's maddubs path, wrap of -128 included). The
// integer sums equal the AVX2 kernels' lane for lane, and the float steps are theirs
// (ref::GetIqX86OrderVecDot's order), so every x86 level gives the same bits.
#include <cmath>

#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

COHORT_TARGET_AVX512 inline __m512i Table() {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NlValues)));
}

// 16 int32 lanes: lane m (< 8) sums the products of values 4m..4m+3 of the lower 32, lane
// m + 8 those of the upper 32: |w| unsigned times a with w's sign moved onto it in 8 bits.
// w: table values, a: activations gives x86's vec-dot products (a -128 wraps); swapped, true
// products (|a| <= 128 fits an unsigned byte, w's values cannot wrap).
COHORT_TARGET_AVX512 inline __m512i Dot64(__m512i w, __m512i a) {
  const __mmask64 negative = _mm512_movepi8_mask(w);
  const __m512i moved = _mm512_mask_sub_epi8(a, negative, _mm512_setzero_si512(), a);
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), moved);
}

COHORT_TARGET_AVX512 inline __m512i Join(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

COHORT_TARGET_AVX512 float VecDotIq4Nl(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Nl*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  const __m512i table = Table();
  const int64_t nb = n / kQK;
  float acc = 0.0f;
  int64_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    const __m512i q = _mm512_shuffle_epi8(table, Join(x86::UnpackNibbles16(x[i].qs), x86::UnpackNibbles16(x[i + 1].qs)));
    const __m512i dot = Dot64(q, Join(x86::Load32(y[i].qs), x86::Load32(y[i + 1].qs)));
    const int s0 = x86::HorizontalSum(_mm512_castsi512_si256(dot));
    const int s1 = x86::HorizontalSum(_mm512_extracti64x4_epi64(dot, 1));
    acc = std::fma(static_cast<float>(s0), x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d), acc);
    acc = std::fma(static_cast<float>(s1), x86::HalfToFloat(x[i + 1].d) * x86::HalfToFloat(y[i + 1].d), acc);
  }
  if (i < nb) {
    const __m256i q = _mm256_shuffle_epi8(_mm512_castsi512_si256(table), x86::UnpackNibbles16(x[i].qs));
    const int s = x86::HorizontalSum(x86::DotSignedBytes(q, x86::Load32(y[i].qs)));
    acc = std::fma(static_cast<float>(s), x86::HalfToFloat(x[i].d) * x86::HalfToFloat(y[i].d), acc);
  }
  return acc;
}

// 64 nibbles of sub-blocks ib and ib + 1 (32 bytes of qs) as [low 16 of ib, high 16 of ib,
// low 16 of ib + 1, high 16 of ib + 1]: the values' order in the activation row.
COHORT_TARGET_AVX512 inline __m512i Nibbles64(const uint8_t* qs) {
  const __m256i raw = x86::Load32(qs);
  const __m256i mask = _mm256_set1_epi8(0x0f);
  const __m256i lo = _mm256_and_si256(raw, mask);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), mask);
  return Join(_mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31));
}

COHORT_TARGET_AVX512 float VecDotIq4Xs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m512i table = Table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m512i sum = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ib += 2) {
      const __m512i q = _mm512_shuffle_epi8(table, Nibbles64(x[i].qs + 16 * ib));
      const __m512i dot = Dot64(q, _mm512_loadu_si512(y[i].qs + 32 * ib));
      const __m512i scale = Join(_mm256_set1_epi32(Iq4XsScale(x[i], ib)), _mm256_set1_epi32(Iq4XsScale(x[i], ib + 1)));
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dot, scale));
    }
    const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc);
  }
  return x86::HorizontalSum(acc);
}

// Batches of >= 8 tokens (ref's VecDotIq4XsPanel): true products, the activation's sign moved
// onto the weight (|a| <= 128 as an unsigned byte), one float step per super-block.
COHORT_TARGET_AVX512 float VecDotIq4XsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq4Xs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m512i table = Table();
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m512i sum = _mm512_setzero_si512();
    for (int ib = 0; ib < 8; ib += 2) {
      const __m512i q = _mm512_shuffle_epi8(table, Nibbles64(x[i].qs + 16 * ib));
      const __m512i dot = Dot64(_mm512_loadu_si512(y[i].qs + 32 * ib), q);
      const __m512i scale = Join(_mm256_set1_epi32(Iq4XsScale(x[i], ib)), _mm256_set1_epi32(Iq4XsScale(x[i], ib + 1)));
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dot, scale));
    }
    acc = std::fma(static_cast<float>(_mm512_reduce_add_epi32(sum)), x86::HalfToFloat(x[i].d) * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIqVecDotGrouped(DType weight) {
  return weight == DType::kIQ4_XS ? VecDotIq4XsPanel : GetIqVecDot(weight);
}

VecDotFn GetIqVecDot(DType weight) {
  switch (weight) {
    case DType::kIQ4_NL: return VecDotIq4Nl;
    case DType::kIQ4_XS: return VecDotIq4Xs;
    default: return nullptr;
  }
}

#else

VecDotFn GetIqVecDot(DType) { return nullptr; }
VecDotFn GetIqVecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx512
