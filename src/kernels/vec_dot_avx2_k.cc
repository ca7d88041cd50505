// AVX2 vec-dot kernels for the K-quants (Q2_K..Q6_K weights against Q8_K activations). Per
// super-block the integer sums are exact; they are scaled by d_w * d_a into 8 float lanes,
// and the mins (Q2_K, Q4_K, Q5_K) meet Q8_K's precomputed sums of 16 quants, as in ggml.
#include <cmath>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HorizontalSum;
using x86::Load32;

// int16 lanes 0..7 get scale `lo`, lanes 8..15 get `hi` (the two 16-element halves of 32).
COHORT_TARGET_AVX2 inline __m256i ScalePair(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(hi)),
                          _mm_set1_epi16(static_cast<int16_t>(lo)));
}

// Sum of q*y over 32 elements with q unsigned (< 128), split into two 16-element halves
// weighted by their scales, as 8 int32 lanes.
COHORT_TARGET_AVX2 inline __m256i ScaledDot(__m256i q, __m256i y, __m256i scales) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), scales);
}

// Sum over 16 groups of bsums[g] * mins[g / group_per_min].
inline int MinSum(const BlockQ8_K& y, const int* mins, int groups_per_min) {
  int sum = 0;
  for (int g = 0; g < 16; ++g) sum += y.bsums[g] * mins[g / groups_per_min];
  return sum;
}

// On AVX2 machines llama.cpp repacks Q4_K weights 8 rows at a time (ggml's q4_K_8x8 kernels)
// and keeps two float accumulators per row, fed whole integer sums (scaled quants; mins times
// activation sums): acc = fma(sum, d_w * d_a, acc), acc_min = fma(min_sum, dmin_w * d_a,
// acc_min), value acc - acc_min. Its GEMV (single tokens) feeds them once per super-block;
// its GEMM (full groups of 4 tokens) once per pair of sub-blocks (64 elements): kPerPair.
template <bool kPerPair>
COHORT_TARGET_AVX2 float VecDotQ4_KRepacked(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  float acc = 0;
  float acc_min = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(x[i].scales, j, &sc[j], &mn[j]);
    const float yd = y[i].d;
    const float d = x86::HalfToFloat(x[i].d) * yd;
    const float dmin = x86::HalfToFloat(x[i].dmin) * yd;
    __m256i sum = _mm256_setzero_si256();
    int min_sum = 0;
    for (int c = 0; c < 4; ++c) {  // 64 elements: 32 low nibbles, then 32 high nibbles
      const __m256i q = Load32(x[i].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, low_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
      sum = _mm256_add_epi32(sum, ScaledDot(lo, Load32(y[i].qs + 64 * c), ScalePair(sc[2 * c], sc[2 * c])));
      sum = _mm256_add_epi32(sum, ScaledDot(hi, Load32(y[i].qs + 64 * c + 32), ScalePair(sc[2 * c + 1], sc[2 * c + 1])));
      const int pair_min = Q4KPairMinSum(y[i], mn, c);
      if constexpr (kPerPair) {
        acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), d, acc);
        acc_min = std::fma(static_cast<float>(pair_min), dmin, acc_min);
        sum = _mm256_setzero_si256();
      } else {
        min_sum += pair_min;
      }
    }
    if constexpr (!kPerPair) {
      acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), d, acc);
      acc_min = std::fma(static_cast<float>(min_sum), dmin, acc_min);
    }
  }
  return acc - acc_min;
}

COHORT_TARGET_AVX2 float VecDotQ5_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) GetScaleMinK4(x[i].scales, j, &sc[j], &mn[j]);
    const float yd = y[i].d;
    acc_min += (x86::HalfToFloat(x[i].dmin) * yd) * static_cast<float>(MinSum(y[i], mn, 2));
    const __m256i qh = Load32(x[i].qh);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = Load32(x[i].qs + 32 * c);
      // Bit 2c of qh[l] is the fifth bit of the low-nibble element, bit 2c+1 of the high one.
      const __m256i h_lo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4);
      const __m256i h_hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, low_mask), h_lo);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask), h_hi);
      sum = _mm256_add_epi32(sum, ScaledDot(lo, Load32(y[i].qs + 64 * c), ScalePair(sc[2 * c], sc[2 * c])));
      sum = _mm256_add_epi32(sum, ScaledDot(hi, Load32(y[i].qs + 64 * c + 32), ScalePair(sc[2 * c + 1], sc[2 * c + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x86::HalfToFloat(x[i].d) * yd), _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc) - acc_min;
}

// Q6_K quants are u - 32 with u in [0, 64). As in ggml's AVX2 kernel, the products u * y fill
// 8 int32 lanes (lane m: bytes 4m..4m+3 of each 32-byte chunk, scaled), and the -32 is taken
// off afterwards from Q8_K's block sums: lane m loses 32 * (bsums[2m] * s[2m] + bsums[2m+1] *
// s[2m+1]). The lane contents decide the float rounding, so they follow ggml exactly.
COHORT_TARGET_AVX2 float VecDotQ6_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const __m256i scales16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].scales)));
    const __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(Load32(y[i].bsums), scales16), 5);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {  // halves of 128 elements
      const __m256i ql0 = Load32(x[i].ql + 64 * h);
      const __m256i ql1 = Load32(x[i].ql + 64 * h + 32);
      const __m256i qh = Load32(x[i].qh + 32 * h);
      const __m256i low[4] = {_mm256_and_si256(ql0, low_mask), _mm256_and_si256(ql1, low_mask),
                              _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask),
                              _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask)};
      for (int g = 0; g < 4; ++g) {  // 32 elements each, scales 2g and 2g+1 of the half
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), two_bits), 4);
        const __m256i u = _mm256_or_si256(low[g], high);
        const __m256i prod = _mm256_maddubs_epi16(u, Load32(y[i].qs + 128 * h + 32 * g));
        const int8_t* s = x[i].scales + 8 * h + 2 * g;
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(prod, ScalePair(s[0], s[1])));
      }
    }
    sum = _mm256_sub_epi32(sum, bias);
    acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * x86::HalfToFloat(x[i].d)), _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc);
}

COHORT_TARGET_AVX2 float VecDotQ2_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  __m256 acc = _mm256_setzero_ps();
  float acc_min = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int mins[16];
    for (int j = 0; j < 16; ++j) mins[j] = x[i].scales[j] >> 4;
    acc_min += (x86::HalfToFloat(x[i].dmin) * y[i].d) * static_cast<float>(MinSum(y[i], mins, 1));
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q2 = Load32(x[i].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {  // elements 128h + 32j + l sit at bits 2j of byte l
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * j), two_bits);
        const uint8_t* s = x[i].scales + 8 * h + 2 * j;
        sum = _mm256_add_epi32(sum, ScaledDot(q, Load32(y[i].qs + 128 * h + 32 * j),
                                              ScalePair(s[0] & 0xf, s[1] & 0xf)));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc) - acc_min;
}

// Q3_K quants are u - 4 with u = low2 + 4 * high_bit in [0, 8).
COHORT_TARGET_AVX2 float VecDotQ3_K(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  const __m256i one = _mm256_set1_epi8(1);
  const __m256i bias = _mm256_set1_epi8(4);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    int sc[16];
    for (int j = 0; j < 16; ++j) sc[j] = GetQ3KScale(x[i].scales, j);
    const __m256i hm = Load32(x[i].hmask);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i q3 = Load32(x[i].qs + 32 * h);
      for (int j = 0; j < 4; ++j) {
        const __m256i low = _mm256_and_si256(_mm256_srli_epi16(q3, 2 * j), two_bits);
        const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one), 2);
        const __m256i u = _mm256_or_si256(low, high);
        const __m256i yq = Load32(y[i].qs + 128 * h + 32 * j);
        const __m256i prod = _mm256_sub_epi16(_mm256_maddubs_epi16(u, yq), _mm256_maddubs_epi16(bias, yq));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(prod, ScalePair(sc[8 * h + 2 * j], sc[8 * h + 2 * j + 1])));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc);
}

}  // namespace

VecDotFn GetKVecDot(DType weight) {
  switch (weight) {
    case DType::kQ2_K: return VecDotQ2_K;
    case DType::kQ3_K: return VecDotQ3_K;
    case DType::kQ4_K: return VecDotQ4_KRepacked<false>;
    case DType::kQ5_K: return VecDotQ5_K;
    case DType::kQ6_K: return VecDotQ6_K;
    default: return nullptr;
  }
}

VecDotFn GetKVecDotGrouped(DType weight) {
  return weight == DType::kQ4_K ? VecDotQ4_KRepacked<true> : GetKVecDot(weight);
}

#endif

}  // namespace cohort::kernels::avx2
