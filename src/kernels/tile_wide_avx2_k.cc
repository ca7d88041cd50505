// AVX2 (and AVX-VNNI) wide tile kernels (tile_wide.h) for Q4_K and Q6_K against Q8_K
// activations, on the stored rows and on the packed copy (pack.h): bit-identical per (row,
// token) to the AVX2 vec-dots (vec_dot_avx2_k.cc), Q4_K in both of llama.cpp's orders. The
// kernels are tile_wide_avx2_k_body.h, compiled here twice: for AVX2 and for AVX-VNNI.
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// Q8_K side data: x86::SideQ8_K (tile_wide_x86.h), shared with the other ISA's K kernels.
using x86::kQ8KSideWords;
using x86::SideQ8_K;

// A software prefetch into L2 (prefetches never fault, so reading past the matrix is safe).
inline void PrefetchL2(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }

// Tokens per call: 4 keeps the per-token integer sums in registers. The plain and the grouped
// Q4_K kernels share it and the side data (MatMul switches between them within a batch).
constexpr int kQ4KTokens = 4;
constexpr int kQ6KTokens = 4;

// vpdpbusd and vpdpwssd in AVX2. Dpbusd: lane k += the 4 products of lane k's unsigned
// bytes of u with the signed bytes of s (no saturation): even and odd bytes widened to int16,
// two madds. Dpwssd: lane k += the 2 products of its int16 pairs.
COHORT_TARGET_AVX2 inline __m256i DpbusdInAvx2(__m256i sum, __m256i u, __m256i s) {
  const __m256i byte = _mm256_set1_epi16(0xff);
  const __m256i u_even = _mm256_and_si256(u, byte), u_odd = _mm256_srli_epi16(u, 8);
  const __m256i s_even = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), s_odd = _mm256_srai_epi16(s, 8);
  return _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_madd_epi16(u_even, s_even), _mm256_madd_epi16(u_odd, s_odd)));
}
COHORT_TARGET_AVX2 inline __m256i DpwssdInAvx2(__m256i sum, __m256i a, __m256i b) {
  return _mm256_add_epi32(sum, _mm256_madd_epi16(a, b));
}

namespace plain {
#define COHORT_K_TARGET COHORT_TARGET_AVX2
constexpr bool kVnni = false;
// Named by the body's VNNI branches only, which this instantiation discards.
COHORT_K_TARGET inline __m256i Dpbusd(__m256i sum, __m256i u, __m256i s) { return DpbusdInAvx2(sum, u, s); }
COHORT_K_TARGET inline __m256i Dpwssd(__m256i sum, __m256i a, __m256i b) { return DpwssdInAvx2(sum, a, b); }
#include "kernels/tile_wide_avx2_k_body.h"
#undef COHORT_K_TARGET
}  // namespace plain

namespace vnni {
#define COHORT_K_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
constexpr bool kVnni = true;
COHORT_K_TARGET inline __m256i Dpbusd(__m256i sum, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(sum, u, s); }
COHORT_K_TARGET inline __m256i Dpwssd(__m256i sum, __m256i a, __m256i b) { return _mm256_dpwssd_avx_epi32(sum, a, b); }
#include "kernels/tile_wide_avx2_k_body.h"
#undef COHORT_K_TARGET
}  // namespace vnni

// The VNNI kernels with the two instructions done in AVX2, for the tests on CPUs without
// AVX-VNNI (this build's CPU among them): the same code but for the instruction encodings.
namespace vnni_in_avx2 {
#define COHORT_K_TARGET COHORT_TARGET_AVX2
constexpr bool kVnni = true;
COHORT_K_TARGET inline __m256i Dpbusd(__m256i sum, __m256i u, __m256i s) { return DpbusdInAvx2(sum, u, s); }
COHORT_K_TARGET inline __m256i Dpwssd(__m256i sum, __m256i a, __m256i b) { return DpwssdInAvx2(sum, a, b); }
#include "kernels/tile_wide_avx2_k_body.h"
#undef COHORT_K_TARGET
}  // namespace vnni_in_avx2

}  // namespace

WideTile GetWideTileK(DType weight, bool grouped, bool use_vnni) {
  return use_vnni ? vnni::WideTileK(weight, grouped, false) : plain::WideTileK(weight, grouped, false);
}

WideTile GetWideTilePackedK(DType weight, bool grouped, bool use_vnni) {
  return use_vnni ? vnni::WideTileK(weight, grouped, true) : plain::WideTileK(weight, grouped, true);
}

// For tests only (declared in tests/kernels/tile_wide_test.cc): the AVX-VNNI kernels, their
// VNNI instructions done in AVX2, so they run wherever AVX2 does.
WideTile GetWideTileKVnniInAvx2(DType weight, bool grouped, bool packed) {
  return vnni_in_avx2::WideTileK(weight, grouped, packed);
}

#else

WideTile GetWideTileK(DType, bool, bool) { return {}; }
WideTile GetWideTilePackedK(DType, bool, bool) { return {}; }
WideTile GetWideTileKVnniInAvx2(DType, bool, bool) { return {}; }

#endif

}  // namespace cohort::kernels::avx2
