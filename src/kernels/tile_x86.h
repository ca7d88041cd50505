// Helpers for the AVX-512 tile kernels whose float accumulation is one scalar per (row,
// token) (llama.cpp's repacked-kernel orders): the whole integer sums of up to 4 rows are
// reduced together into the 4 lanes of one vector, so the float steps run 4 rows at a time,
// lane r doing exactly the scalar arithmetic of row r. Internal to src/kernels.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include "kernels/simd_x86.h"

namespace cohort::kernels::x86 {

// Lane r = the sum of the 8 int32 lanes of v[r] (exact: integer adds in any order).
COHORT_TARGET_AVX512 inline __m128i Reduce4(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

template <int R>
COHORT_TARGET_AVX512 inline __m128i Reduce4(const __m256i* v) {
  const __m256i z = _mm256_setzero_si256();
  return Reduce4(v[0], R > 1 ? v[1] : z, R > 2 ? v[2] : z, R > 3 ? v[3] : z);
}

// v with 16-bit lane `lane` (0..3) replaced by h: the fp16 scales of 4 rows gathered in
// registers, then widened by one vcvtph2ps (the same conversion as HalfToFloat).
COHORT_TARGET_AVX512 inline __m128i InsertHalf(__m128i v, uint16_t h, int lane) {
  switch (lane) {
    case 0: return _mm_insert_epi16(v, h, 0);
    case 1: return _mm_insert_epi16(v, h, 1);
    case 2: return _mm_insert_epi16(v, h, 2);
    default: return _mm_insert_epi16(v, h, 3);
  }
}

COHORT_TARGET_AVX512 inline __m128i InsertInt(__m128i v, int x, int lane) {
  switch (lane) {
    case 0: return _mm_insert_epi32(v, x, 0);
    case 1: return _mm_insert_epi32(v, x, 1);
    case 2: return _mm_insert_epi32(v, x, 2);
    default: return _mm_insert_epi32(v, x, 3);
  }
}

// A software prefetch into L2 (prefetches never fault, so reading past the matrix is safe).
inline void PrefetchNextTile(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }

// Lane r of acc written to out[r] for r < R.
template <int R>
COHORT_TARGET_AVX512 inline void StoreLanes(__m128 acc, float* out) {
  float lanes[4];
  _mm_storeu_ps(lanes, acc);
  for (int r = 0; r < R; ++r) out[r] = lanes[r];
}

}  // namespace cohort::kernels::x86

#endif
