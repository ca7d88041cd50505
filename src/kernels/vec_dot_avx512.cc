// AVX-512 kernels (F, BW, VL, VNNI), chosen at run time on CPUs that have them: the 8-bit
// products of Q8_0/Q4_0/Q5_0 use VNNI's dpbusd (4 byte products summed into int32 in one
// instruction), F32/F16 use 16-wide FMA. Types without a kernel here use their AVX2 one.
#include <cmath>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;
using x86::Load32;

// Sums of 4 adjacent products of signed bytes x and y (|x| <= 128, |y| <= 127) in 8 int32
// lanes: the sign of x moves onto y so that dpbusd's unsigned x signed product applies.
COHORT_TARGET_AVX512 inline __m256i DotSignedBytesVnni(__m256i x, __m256i y) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

COHORT_TARGET_AVX512 inline float HorizontalSum(__m256 v) { return x86::HorizontalSum(v); }

template <typename Block, typename UnpackFn>
COHORT_TARGET_AVX512 inline float DotQ8_0Blocks(const Block* x, const BlockQ8_0* y, int64_t nb,
                                               UnpackFn unpack) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const __m256 d = _mm256_set1_ps(HalfToFloat(x[i].d) * HalfToFloat(y[i].d));
    const __m256i sum = DotSignedBytesVnni(unpack(x[i]), Load32(y[i].qs));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return HorizontalSum(acc);
}

struct UnpackQ8_0 {
  COHORT_TARGET_AVX512 __m256i operator()(const BlockQ8_0& b) const { return Load32(b.qs); }
};
struct UnpackQ4_0 {
  COHORT_TARGET_AVX512 __m256i operator()(const BlockQ4_0& b) const {
    return _mm256_sub_epi8(x86::UnpackNibbles16(b.qs), _mm256_set1_epi8(8));
  }
};
struct UnpackQ5_0 {
  COHORT_TARGET_AVX512 __m256i operator()(const BlockQ5_0& b) const {
    const __m256i high = _mm256_andnot_si256(x86::BitsToBytes32(b.qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    return _mm256_or_si256(x86::UnpackNibbles16(b.qs), high);
  }
};

COHORT_TARGET_AVX512 float VecDotQ8_0(const void* w, const void* a, int64_t n) {
  return DotQ8_0Blocks(static_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(a), n / kQK, UnpackQ8_0{});
}
// Q4_0 follows llama.cpp's repacked q4_0_8x8 kernels (see vec_dot_avx2.cc): one float
// accumulator per row, fed each block's whole integer sum.
COHORT_TARGET_AVX512 float VecDotQ4_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float acc = 0;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = HalfToFloat(x[i].d) * HalfToFloat(y[i].d);
    const int sum = x86::HorizontalSum(DotSignedBytesVnni(UnpackQ4_0{}(x[i]), Load32(y[i].qs)));
    acc = std::fma(static_cast<float>(sum), d, acc);
  }
  return acc;
}
COHORT_TARGET_AVX512 float VecDotQ5_0(const void* w, const void* a, int64_t n) {
  return DotQ8_0Blocks(static_cast<const BlockQ5_0*>(w), static_cast<const BlockQ8_0*>(a), n / kQK, UnpackQ5_0{});
}

// F32 / F16: 16-wide FMA with two accumulators; the remainder (< 16) is handled with a mask.
template <bool kHalf>
COHORT_TARGET_AVX512 inline __m512 Load16(const uint8_t* row, int64_t i, __mmask16 mask) {
  if constexpr (kHalf) {
    // maskz_ form: GCC 12 warns (falsely) about the undefined source of the plain one.
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(mask, row + 2 * i));
  } else {
    return _mm512_maskz_loadu_ps(mask, row + 4 * i);
  }
}

template <bool kHalf>
COHORT_TARGET_AVX512 float VecDotFloat(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const uint8_t*>(a);
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  const __mmask16 all = 0xffff;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(Load16<kHalf>(x, i, all), Load16<kHalf>(y, i, all), acc0);
    acc1 = _mm512_fmadd_ps(Load16<kHalf>(x, i + 16, all), Load16<kHalf>(y, i + 16, all), acc1);
  }
  for (; i < n; i += 16) {
    const int64_t left = n - i;
    const __mmask16 mask = left >= 16 ? all : static_cast<__mmask16>((1u << left) - 1);
    acc0 = _mm512_fmadd_ps(Load16<kHalf>(x, i, mask), Load16<kHalf>(y, i, mask), acc0);
  }
  // Reduced through memory: GCC 12 warns (falsely) inside _mm512_reduce_add_ps.
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(acc0, acc1));
  return HorizontalSum(_mm256_add_ps(_mm256_loadu_ps(lanes), _mm256_loadu_ps(lanes + 8)));
}

}  // namespace

VecDotFn GetVecDot(DType weight) {
  switch (weight) {
    case DType::kF32: return VecDotFloat<false>;
    // F16 takes the AVX2 kernel, whose order the scalar level reproduces (quant_ref_x86.cc);
    // this one's differs, and F16 rows are bandwidth-bound at either width.
    case DType::kQ4_0: return VecDotQ4_0;
    case DType::kQ5_0: return VecDotQ5_0;
    case DType::kQ8_0: return VecDotQ8_0;
    default: return nullptr;
  }
}

#else

VecDotFn GetVecDot(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx512
