// The AVX2 IQ1_S and IQ1_M x Q8_K vec-dots, bit for bit ref::GetIq1X86OrderVecDot's and
// ref::GetIq1X86OrderVecDotGrouped's orders: llama.cpp's ggml_vec_dot_iq1_{s,m}_q8_K (grid bytes
// times activations by sign_epi8 + maddubs, 8 int lanes, the delta part apart: IQ1_S's from the
// Q8_K block sums into one float, IQ1_M's in lanes of its own) and its panel GEMM for batches
// (iqp.cpp: 8 * grid + delta as int8, true products, one float step per super-block).
// Compiled with -ffp-contract=off: the float steps are written as llama.cpp's build makes them.
#include <cmath>

#include "kernels/iq1_grids.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// Sub-block ib's 32 grid values (signed bytes -1, 0, 1).
template <typename Block>
COHORT_TARGET_AVX2 inline __m256i LoadGrid(const Block& b, int ib) {
  const auto g = [&](int l) { return static_cast<long long>(Iq1GridWord(b, ib, l)); };
  return _mm256_set_epi64x(g(3), g(2), g(1), g(0));
}

// Sub-block ib's delta signs as bytes, +1 or -1, each over its group of 8.
template <typename Block>
COHORT_TARGET_AVX2 inline __m256i LoadDeltas(const Block& b, int ib) {
  const auto d = [&](int l) {
    return static_cast<long long>(Iq1DeltaSign(b, ib, l) < 0 ? ~0ull : 0x0101010101010101ull);
  };
  return _mm256_set_epi64x(d(3), d(2), d(1), d(0));
}

// Pairs of products x * q as x86's mul_add_epi8 forms them (the sign of x moved onto q in 8 bits,
// so q = -128 under a minus wraps), 16 int16 lanes.
COHORT_TARGET_AVX2 inline __m256i SignedPairs(__m256i x, __m256i q) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(q, x));
}

// The scale of values 0..15 in the low 128 bits, of 16..31 in the high ones (16-bit lanes).
template <typename Block>
COHORT_TARGET_AVX2 inline __m256i Scales16(const Block& b, int ib) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(Iq1Scale(b, ib, 1))),
                          _mm_set1_epi16(static_cast<int16_t>(Iq1Scale(b, ib, 0))));
}

COHORT_TARGET_AVX2 float VecDotIq1S(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1S*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256 accum = _mm256_setzero_ps();
  float accum1 = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi = _mm256_setzero_si256();
    int sumi1 = 0;
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i dot = SignedPairs(LoadGrid(x[i], ib), x86::Load32(y[i].qs + 32 * ib));
      const int ls = Iq1SScale(x[i], ib);
      sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(dot, _mm256_set1_epi16(static_cast<int16_t>(ls))));
      sumi1 += (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]) * Iq1SDeltaSign(x[i], ib) * ls;
    }
    const float d = y[i].d * x86::HalfToFloat(x[i].d);
    accum = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), accum);
    accum1 = std::fma(d, static_cast<float>(sumi1), accum1);
  }
  const float delta = kIq1Delta * accum1;
  return x86::HorizontalSum(accum) + delta;
}

COHORT_TARGET_AVX2 float VecDotIq1M(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq1M*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  const __m256i ones = _mm256_set1_epi8(1);
  __m256 accum1 = _mm256_setzero_ps(), accum2 = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sumi1 = _mm256_setzero_si256(), sumi2 = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const __m256i q8 = x86::Load32(y[i].qs + 32 * ib);
      const __m256i dot = SignedPairs(LoadGrid(x[i], ib), q8);
      const __m256i delta = _mm256_maddubs_epi16(ones, _mm256_sign_epi8(q8, LoadDeltas(x[i], ib)));
      const __m256i scales = Scales16(x[i], ib);
      sumi1 = _mm256_add_epi32(sumi1, _mm256_madd_epi16(dot, scales));
      sumi2 = _mm256_add_epi32(sumi2, _mm256_madd_epi16(delta, scales));
    }
    const __m256 d = _mm256_set1_ps(y[i].d * x86::HalfToFloat(Iq1MSuperScale(x[i])));
    accum1 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi1), accum1);
    accum2 = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi2), accum2);
  }
  return std::fma(x86::HorizontalSum(accum2), kIq1Delta, x86::HorizontalSum(accum1));
}

template <typename Block>
COHORT_TARGET_AVX2 float VecDotIq1Panel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      __m256i v = LoadGrid(x[i], ib);
      v = _mm256_add_epi8(v, v);
      v = _mm256_add_epi8(v, v);
      v = _mm256_add_epi8(_mm256_add_epi8(v, v), LoadDeltas(x[i], ib));  // 8 * grid + delta, |v| <= 9
      const __m256i dot = x86::DotSignedBytes(x86::Load32(y[i].qs + 32 * ib), v);  // lane m: values 4m..4m+3
      const int s0 = Iq1Scale(x[i], ib, 0), s1 = Iq1Scale(x[i], ib, 1);
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1)));
    }
    acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)),
                   x86::HalfToFloat(Iq1SuperScaleBits(x[i])) * 0.125f * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIq1VecDot(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotIq1S;
  return weight == DType::kIQ1_M ? VecDotIq1M : nullptr;
}
VecDotFn GetIq1VecDotGrouped(DType weight) {
  if (weight == DType::kIQ1_S) return VecDotIq1Panel<BlockIq1S>;
  return weight == DType::kIQ1_M ? VecDotIq1Panel<BlockIq1M> : nullptr;
}

#else

VecDotFn GetIq1VecDot(DType) { return nullptr; }
VecDotFn GetIq1VecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
