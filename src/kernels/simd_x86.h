// Small AVX2 building blocks shared by the x86 kernel files. Every function carries its
// target attribute, so this header can be included by files compiled for generic x86-64:
// the code only runs after quant.cc's run-time CPU check picked the AVX2 kernels.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#define COHORT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define COHORT_TARGET_AVX512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))
// The AVX-512 level plus GFNI (not part of the level: Cascade Lake has VNNI without it); its
// users check __builtin_cpu_supports("gfni") at run time.
#define COHORT_TARGET_AVX512_GFNI \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,gfni")))

namespace cohort::kernels::x86 {

// fp16 bits -> float with F16C (one instruction, versus the portable bit-twiddling).
COHORT_TARGET_AVX2 inline float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

COHORT_TARGET_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

COHORT_TARGET_AVX2 inline int HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

// Loads 32 bytes into a register that stays one: GCC folds a plain load into every
// instruction that uses it as a memory operand, so a value used by several (Q8_0's
// activation, by one dpbusd per row) is loaded once per use; the empty asm makes the value
// opaque to that folding. (Loaded 4 times per block, Q8_0's kernel ran 30% slower.)
COHORT_TARGET_AVX2 inline __m256i LoadToRegister(const void* p) {
  __m256i v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
  asm("" : "+v"(v));
  return v;
}
COHORT_TARGET_AVX512 inline __m512i LoadToRegister512(const void* p) {
  __m512i v = _mm512_loadu_si512(p);
  asm("" : "+v"(v));
  return v;
}
COHORT_TARGET_AVX2 inline __m256i Load32(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 bytes: the 16 low nibbles of p[0..16) then the 16 high nibbles.
COHORT_TARGET_AVX2 inline __m256i UnpackNibbles16(const uint8_t* p) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Byte j = 0xff if bit j of the 32-bit little-endian word at p is set, else 0.
COHORT_TARGET_AVX2 inline __m256i BitsToBytes32(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  // Byte j gets source byte j / 8, then keeps only bit j % 8.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0));
  const __m256i select = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
}

// Sums of 4 adjacent products of signed bytes x and y, as 8 int32 lanes. The sign of x is
// moved onto y so maddubs (unsigned x signed) applies; |x| <= 128, |y| <= 127 cannot saturate.
COHORT_TARGET_AVX2 inline __m256i DotSignedBytes(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);
  const __m256i sy = _mm256_sign_epi8(y, x);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}

// The same for unsigned x (values < 128).
COHORT_TARGET_AVX2 inline __m256i DotUnsignedBytes(__m256i x, __m256i y) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

}  // namespace cohort::kernels::x86

#endif
