// AVX2 (+FMA, F16C) tile kernels (tile.h) for the legacy types: Q4_0, Q5_0 and Q8_0 against
// Q8_0 activations, Q4_1 and Q5_1 against Q8_1. Per (row, token) each reproduces its AVX2
// vec-dot (vec_dot_avx2.cc) step for step: the same integer sums per block, the same float
// operations in the same order (Q5_0, Q8_0, Q4_1, Q5_1: 8 float lanes, then HorizontalSum;
// Q4_0: one float per row, the block's whole integer sum fused in), so a tile and a vec-dot
// loop give the same bits. The AVX-VNNI level takes these kernels too (its vec-dots are the
// AVX2 ones). They serve the rows left over after the wide tiles' groups of 16, and every row
// of the types without wide tiles. The K-quants go to tile_avx2_k.cc.
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile.h"
#include "kernels/tile_table.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;
using x86::Load32;

enum class Legacy { kQ4_0, kQ5_0, kQ8_0, kQ4_1, kQ5_1 };

template <Legacy kType>
struct BlockOf;
template <>
struct BlockOf<Legacy::kQ4_0> { using type = BlockQ4_0; using act = BlockQ8_0; };
template <>
struct BlockOf<Legacy::kQ5_0> { using type = BlockQ5_0; using act = BlockQ8_0; };
template <>
struct BlockOf<Legacy::kQ8_0> { using type = BlockQ8_0; using act = BlockQ8_0; };
template <>
struct BlockOf<Legacy::kQ4_1> { using type = BlockQ4_1; using act = BlockQ8_1; };
template <>
struct BlockOf<Legacy::kQ5_1> { using type = BlockQ5_1; using act = BlockQ8_1; };

constexpr bool IsAffine(Legacy t) { return t == Legacy::kQ4_1 || t == Legacy::kQ5_1; }

// A block's quants as the vec-dot makes them: signed bytes for Q4_0 (q - 8), Q5_0, Q8_0;
// unsigned for Q4_1, Q5_1.
template <Legacy kType>
COHORT_TARGET_AVX2 inline __m256i WeightBytes(const typename BlockOf<kType>::type& b) {
  if constexpr (kType == Legacy::kQ4_0) {
    return _mm256_sub_epi8(x86::UnpackNibbles16(b.qs), _mm256_set1_epi8(8));
  } else if constexpr (kType == Legacy::kQ5_0) {
    const __m256i high = _mm256_andnot_si256(x86::BitsToBytes32(b.qh), _mm256_set1_epi8(static_cast<char>(0xf0)));
    return _mm256_or_si256(x86::UnpackNibbles16(b.qs), high);
  } else if constexpr (kType == Legacy::kQ8_0) {
    return Load32(b.qs);
  } else if constexpr (kType == Legacy::kQ4_1) {
    return x86::UnpackNibbles16(b.qs);
  } else {
    const __m256i high = _mm256_and_si256(x86::BitsToBytes32(b.qh), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(x86::UnpackNibbles16(b.qs), high);
  }
}

// Software prefetch into L2 of the next tile's rows (the caller's next rows w_stride on):
// 4 row streams at once outrun the hardware prefetcher.
inline void PrefetchNextTile(const uint8_t* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }

// The 8-lane types, as VecDotQ8_0 / VecDotQ5_0 / VecDotAffine: per (row, token, block)
// acc = fma(d_w * d_a, float(int32 lanes), acc); Q4_1 / Q5_1 add m_w * s_a to a float of
// their own, block by block, and that to the horizontal sum at the end.
template <Legacy kType, int R, int T>
COHORT_TARGET_AVX2 void TileLanes(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                  int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
  using Block = typename BlockOf<kType>::type;
  using ActBlock = typename BlockOf<kType>::act;
  constexpr bool kAffine = IsAffine(kType);
  const int64_t nb = n / kQK;
  __m256 acc[R][T];
  float sum_min[R][T] = {};
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    for (int r = 0; r < R; ++r) {
      const Block& b = reinterpret_cast<const Block*>(w + r * w_stride)[i];
      PrefetchNextTile(w + (r + R) * w_stride + i * sizeof(Block));
      const float dw = HalfToFloat(b.d);
      const __m256i q = WeightBytes<kType>(b);
      const __m256i abs_q = kAffine ? q : _mm256_sign_epi8(q, q);
      for (int t = 0; t < T; ++t) {
        const ActBlock& a = reinterpret_cast<const ActBlock*>(act + t * act_stride)[i];
        const __m256 d = _mm256_set1_ps(dw * HalfToFloat(a.d));
        const __m256i y = Load32(a.qs);
        const __m256i s = kAffine ? y : _mm256_sign_epi8(y, q);
        const __m256i sum = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q, s), _mm256_set1_epi16(1));
        acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc[r][t]);
        if constexpr (kAffine) sum_min[r][t] += HalfToFloat(b.m) * HalfToFloat(a.s);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      out[t * out_stride + r] = kAffine ? x86::HorizontalSum(acc[r][t]) + sum_min[r][t] : x86::HorizontalSum(acc[r][t]);
    }
  }
}

// Lane r = the sum of the 8 int32 lanes of v[r] (exact: integer adds in any order), r < R.
template <int R>
COHORT_TARGET_AVX2 inline __m128i Reduce4(const __m256i* v) {
  const __m256i z = _mm256_setzero_si256();
  const __m256i a = v[0], b = R > 1 ? v[1] : z, c = R > 2 ? v[2] : z, d = R > 3 ? v[3] : z;
  const __m256i abcd = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(abcd), _mm256_extracti128_si256(abcd, 1));
}

// Q4_0, as VecDotQ4_0: one float per (row, token), acc = fma(float(block sum), d_w * d_a, acc).
// The R rows' block sums of a token are reduced together into the lanes of one vector, so
// the float steps run R rows at a time, lane r doing exactly row r's scalar arithmetic.
template <int R, int T>
COHORT_TARGET_AVX2 void TileQ4_0(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                 int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK;
  __m128 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    __m256i q[R], abs_q[R];
    uint64_t halves = 0;
    for (int r = 0; r < R; ++r) {
      const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(w + r * w_stride)[i];
      PrefetchNextTile(w + (r + R) * w_stride + i * sizeof(BlockQ4_0));
      q[r] = WeightBytes<Legacy::kQ4_0>(b);
      abs_q[r] = _mm256_sign_epi8(q[r], q[r]);
      halves |= uint64_t{b.d} << (16 * r);
    }
    const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(halves)));
    for (int t = 0; t < T; ++t) {
      const BlockQ8_0& a = reinterpret_cast<const BlockQ8_0*>(act + t * act_stride)[i];
      const __m256i y = Load32(a.qs);
      __m256i sums[R];
      for (int r = 0; r < R; ++r) {
        sums[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(abs_q[r], _mm256_sign_epi8(y, q[r])), _mm256_set1_epi16(1));
      }
      const __m128 d = _mm_mul_ps(dw, _mm_set1_ps(HalfToFloat(a.d)));
      acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(Reduce4<R>(sums)), d, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) {
    float lanes[4];
    _mm_storeu_ps(lanes, acc[t]);
    for (int r = 0; r < R; ++r) out[t * out_stride + r] = lanes[r];
  }
}

template <int R, int T>
struct Q4_0Kernel {
  static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, int64_t n, float* out,
                  int64_t out_stride) {
    TileQ4_0<R, T>(w, w_stride, act, act_stride, n, out, out_stride);
  }
};

template <Legacy kType>
struct LanesKernel {
  template <int R, int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, int64_t n,
                    float* out, int64_t out_stride) {
      TileLanes<kType, R, T>(w, w_stride, act, act_stride, n, out, out_stride);
    }
  };
};

TileFn LegacyTile(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return TileTable<Q4_0Kernel>::Run;
    case DType::kQ5_0: return TileTable<LanesKernel<Legacy::kQ5_0>::Shape>::Run;
    case DType::kQ8_0: return TileTable<LanesKernel<Legacy::kQ8_0>::Shape>::Run;
    case DType::kQ4_1: return TileTable<LanesKernel<Legacy::kQ4_1>::Shape>::Run;
    case DType::kQ5_1: return TileTable<LanesKernel<Legacy::kQ5_1>::Shape>::Run;
    default: return nullptr;
  }
}

}  // namespace

// The legacy types take one order for single tokens and batches alike.
TileFn GetTile(DType weight, bool vnni) {
  if (TileFn fn = LegacyTile(weight)) return fn;
  return GetKTile(weight, vnni);
}

TileFn GetTileGrouped(DType weight, bool vnni) {
  if (TileFn fn = LegacyTile(weight)) return fn;
  return GetKTileGrouped(weight, vnni);
}

#else

TileFn GetTile(DType weight, bool vnni) { return GetKTile(weight, vnni); }
TileFn GetTileGrouped(DType weight, bool vnni) { return GetKTileGrouped(weight, vnni); }

#endif

}  // namespace cohort::kernels::avx2
