// AVX-512 (VNNI) tile kernels for Q4_0, Q5_0 and Q8_0 weights against Q8_0 activations; see
// tile.h. Per (row, token) they reproduce vec_dot_avx512.cc: per block an int32 dot in 8
// lanes (4 byte products each), scaled by d_w * d_a and accumulated with one FMA into 8 float
// lanes, then the same horizontal sum. Q4_0 skips the sign trick: its unsigned nibbles go
// straight into dpbusd, and -8 * sum(y) (per token, shared by the rows) seeds the sum; its
// block sums then go into one float per (row, token), as llama.cpp's repacked Q4_0 kernels do.
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile.h"
#include "kernels/tile_table.h"
#include "kernels/tile_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;
using x86::Load32;

enum class Legacy { kQ4_0, kQ5_0, kQ8_0 };

template <Legacy kType>
struct BlockOf;
template <>
struct BlockOf<Legacy::kQ4_0> { using type = BlockQ4_0; };
template <>
struct BlockOf<Legacy::kQ5_0> { using type = BlockQ5_0; };
template <>
struct BlockOf<Legacy::kQ8_0> { using type = BlockQ8_0; };

// The weight bytes of one block as dpbusd's unsigned operand: Q4_0's raw nibbles (0..15),
// or |q| for the signed types (their sign then moves onto the activations).
template <Legacy kType>
COHORT_TARGET_AVX512 inline __m256i WeightBytes(const typename BlockOf<kType>::type& b) {
  if constexpr (kType == Legacy::kQ4_0) {
    return x86::UnpackNibbles16(b.qs);
  } else if constexpr (kType == Legacy::kQ5_0) {
    const __m256i high = _mm256_andnot_si256(x86::BitsToBytes32(b.qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    return _mm256_or_si256(x86::UnpackNibbles16(b.qs), high);
  } else {
    return Load32(b.qs);
  }
}

// Q5_0 and Q8_0: 8 float lanes per (row, token), as vec_dot_avx512.cc's DotQ8_0Blocks.
template <Legacy kType, int R, int T>
COHORT_TARGET_AVX512 void TileLegacy(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                     int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
  static_assert(kType != Legacy::kQ4_0, "Q4_0 uses TileQ4_0Rows");
  using Block = typename BlockOf<kType>::type;
  const int64_t nb = n / kQK;
  const __m256i zero = _mm256_setzero_si256();
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    __m256i y[T];
    __m256 dy[T];
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(act + t * act_stride)[i];
      y[t] = Load32(b.qs);
      dy[t] = _mm256_set1_ps(HalfToFloat(b.d));
    }
    for (int r = 0; r < R; ++r) {
      const Block& b = reinterpret_cast<const Block*>(w + r * w_stride)[i];
      x86::PrefetchNextTile(w + (r + R) * w_stride + i * sizeof(Block));  // see TileQ4_0Rows
      const __m256 dw = _mm256_set1_ps(HalfToFloat(b.d));
      const __m256i q = WeightBytes<kType>(b);
      const __m256i abs_q = _mm256_sign_epi8(q, q);
      for (int t = 0; t < T; ++t) {
        const __m256i sum = _mm256_dpbusd_epi32(zero, abs_q, _mm256_sign_epi8(y[t], q));
        acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dy[t]), _mm256_cvtepi32_ps(sum), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r] = x86::HorizontalSum(acc[r][t]);
  }
}

// Q4_0 in the repacked order: per (row, token) one float, fed each block's whole integer sum
// with one FMA. The rows are the lanes: 4 rows' sums reduce together and one vector FMA
// advances all 4 (lane r does row r's scalar std::fma exactly).
template <int R, int T>
COHORT_TARGET_AVX512 void TileQ4_0Rows(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                       int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK;
  const __m256i zero = _mm256_setzero_si256();
  const __m256i eights = _mm256_set1_epi8(8);
  __m128 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q[R];
    // The scales go into lanes in registers: a float array stored lane by lane and loaded
    // whole would stall on store forwarding every block.
    __m128i dw_half = _mm_setzero_si128();
    for (int r = 0; r < R; ++r) {
      const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(w + r * w_stride)[i];
      // The next tile's rows (the caller's next call): 4 short row streams defeat the
      // hardware prefetcher, which a decode step, bound by memory, cannot afford.
      x86::PrefetchNextTile(w + (r + R) * w_stride + i * sizeof(BlockQ4_0));
      q[r] = x86::UnpackNibbles16(b.qs);
      dw_half = x86::InsertHalf(dw_half, b.d, r);
    }
    const __m128 dw = _mm_cvtph_ps(dw_half);
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(act + t * act_stride)[i];
      const __m256i y = Load32(b.qs);
      // sum (q - 8) y = dpbusd(q, y) - 8 sum(y), lane by lane, exactly.
      const __m256i seed = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, eights, y));
      __m256i s[R];
      for (int r = 0; r < R; ++r) s[r] = _mm256_dpbusd_epi32(seed, q[r], y);
      const __m128 d = _mm_mul_ps(dw, _mm_set1_ps(HalfToFloat(b.d)));
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(x86::Reduce4<R>(s)), d, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) x86::StoreLanes<R>(acc[t], out + t * out_stride);
}

template <Legacy kType>
struct LegacyKernel {
  template <int R, int T>
  struct Shape {
    COHORT_TARGET_AVX512 static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                         int64_t act_stride, int64_t n, float* out,
                                         int64_t out_stride) {
      if constexpr (kType == Legacy::kQ4_0) {
        TileQ4_0Rows<R, T>(w, w_stride, act, act_stride, n, out, out_stride);
      } else {
        TileLegacy<kType, R, T>(w, w_stride, act, act_stride, n, out, out_stride);
      }
    }
  };
};

}  // namespace

TileFn GetTile(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return TileTable<LegacyKernel<Legacy::kQ4_0>::Shape>::Run;
    case DType::kQ5_0: return TileTable<LegacyKernel<Legacy::kQ5_0>::Shape>::Run;
    case DType::kQ8_0: return TileTable<LegacyKernel<Legacy::kQ8_0>::Shape>::Run;
    default: return GetKTile(weight);
  }
}

#else

TileFn GetTile(DType) { return nullptr; }
TileFn GetKTile(DType) { return nullptr; }
TileFn GetKTileGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx512
