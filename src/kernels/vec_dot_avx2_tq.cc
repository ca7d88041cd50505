// The AVX2 TQ1_0 / TQ2_0 x Q8_K vec-dots, bit for bit ref::GetTernaryX86OrderVecDot's order:
// llama.cpp's ggml_vec_dot_tq{1,2}_0_q8_K (the digits 0..2 against the activations by maddubs
// into 16-bit lanes, the Q8_K block sums subtracted per lane, 8 int lanes, one fma per block,
// hsum_float_8). The AVX-512 level takes these kernels, as llama.cpp's AVX-512 build does.
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/quant_tq.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// Each byte times k, modulo 256 (AVX2 has no 8-bit multiply: the even and odd bytes in 16 bits).
COHORT_TARGET_AVX2 inline __m256i MulBytes(__m256i v, int k) {
  const __m256i factor = _mm256_set1_epi16(static_cast<int16_t>(k));
  const __m256i low = _mm256_and_si256(_mm256_mullo_epi16(v, factor), _mm256_set1_epi16(0x00ff));
  const __m256i high = _mm256_slli_epi16(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), factor), 8);
  return _mm256_or_si256(low, high);
}

// The leading base-3 digit of each byte q, (3 q) >> 8 = ((q + q / 2) / 2) >> 6: avg_epu8 rounds
// up, so it averages q - 1 (saturated) to cancel that, (q - 1 + (q >> 1) + 1) >> 1.
COHORT_TARGET_AVX2 inline __m256i LeadingDigits(__m256i q) {
  const __m256i below = _mm256_subs_epu8(q, _mm256_set1_epi8(1));
  const __m256i half = _mm256_avg_epu8(below, _mm256_setzero_si256());
  const __m256i sum = _mm256_avg_epu8(below, half);
  return _mm256_and_si256(_mm256_srli_epi16(sum, 6), _mm256_set1_epi8(3));
}

// 16-bit lane k: the digits times the activations at bytes 2k and 2k + 1 of 32 values.
COHORT_TARGET_AVX2 inline __m256i DigitProducts(__m256i digits, const int8_t* q8) {
  return _mm256_maddubs_epi16(digits, x86::Load32(q8));
}

// One block's 16-bit lane sums (less the block sums) into the float lanes: one fma.
COHORT_TARGET_AVX2 inline __m256 AddBlock(__m256i sum16, const BlockQ8_K& y, uint16_t d_w, __m256 acc) {
  sum16 = _mm256_sub_epi16(sum16, x86::Load32(y.bsums));
  const __m256i sum32 = _mm256_madd_epi16(sum16, _mm256_set1_epi16(1));
  const __m256 d = _mm256_set1_ps(y.d * x86::HalfToFloat(d_w));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum32), d, acc);
}

COHORT_TARGET_AVX2 float VecDotTq1(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockTq1_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int8_t* q8 = y[i].qs;
    // Values 0..159: digit n of qs[0..32) is values 32 n ... 32 n + 31.
    const __m256i head = x86::Load32(x[i].qs);
    __m256i sum = DigitProducts(LeadingDigits(head), q8);
    for (int n = 1, pow3 = 3; n < 5; ++n, pow3 *= 3) {
      sum = _mm256_add_epi16(sum, DigitProducts(LeadingDigits(MulBytes(head, pow3)), q8 + 32 * n));
    }
    // Values 160..239 (digits of qs[32..48), 16 per digit) and 240..255 (qh, 4 per digit).
    const __m128i tail = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[i].qs + 32));
    const __m256i tail2 = _mm256_set_m128i(tail, tail);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof qh);
    const __m256i qh16 = _mm256_cvtepu8_epi16(_mm_set1_epi32(static_cast<int>(qh)));
    const __m256i qh_pow = _mm256_and_si256(
        _mm256_mullo_epi16(qh16, _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1)),
        _mm256_set1_epi16(0x00ff));
    const __m128i qh_bytes = _mm_packus_epi16(_mm256_castsi256_si128(qh_pow), _mm256_extracti128_si256(qh_pow, 1));
    const __m256i c5 = _mm256_blend_epi32(tail2, MulBytes(tail2, 3), 0xf0);  // x1 | x3
    const __m256i c6 = _mm256_blend_epi32(MulBytes(tail2, 9), MulBytes(tail2, 27), 0xf0);
    const __m256i c7 = _mm256_set_m128i(qh_bytes, _mm256_castsi256_si128(MulBytes(tail2, 81)));
    sum = _mm256_add_epi16(sum, DigitProducts(LeadingDigits(c5), q8 + 160));
    sum = _mm256_add_epi16(sum, DigitProducts(LeadingDigits(c6), q8 + 192));
    sum = _mm256_add_epi16(sum, DigitProducts(LeadingDigits(c7), q8 + 224));
    acc = AddBlock(sum, y[i], x[i].d, acc);
  }
  return x86::HorizontalSum(acc);
}

COHORT_TARGET_AVX2 float VecDotTq2(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockTq2_0*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i mask = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 2; ++c) {
      const __m256i bits = x86::Load32(x[i].qs + 32 * c);
      for (int l = 0; l < 4; ++l) {
        const __m256i digits = _mm256_and_si256(_mm256_srl_epi16(bits, _mm_cvtsi32_si128(2 * l)), mask);
        sum = _mm256_add_epi16(sum, DigitProducts(digits, y[i].qs + 128 * c + 32 * l));
      }
    }
    acc = AddBlock(sum, y[i], x[i].d, acc);
  }
  return x86::HorizontalSum(acc);
}

}  // namespace

VecDotFn GetTernaryVecDot(DType weight) {
  if (weight == DType::kTQ1_0) return VecDotTq1;
  return weight == DType::kTQ2_0 ? VecDotTq2 : nullptr;
}

#else

VecDotFn GetTernaryVecDot(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
