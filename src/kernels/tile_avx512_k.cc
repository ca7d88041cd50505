// AVX-512 (VNNI) tile kernels for Q4_K and Q6_K weights against Q8_K activations; see tile.h.
// Per (row, token) they reproduce the K-quant vec-dots of vec_dot_avx2_k.cc (which the
// AVX-512 level uses): the same exact integer sums (maddubs, then dpwssd folds the scale
// multiply and the add into one instruction), the same float scaling, FMAs and mins term.
// A weight super-block's scales and nibbles are unpacked once and used for every token.
#include <cmath>
#include <cstring>

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


// The 8 six-bit scales and 8 mins of a Q4_K block as bytes (GetScaleMinK4 for j = 0..7).
struct ScalesMins {
  uint8_t sc[8];
  uint8_t mn[8];
};
inline ScalesMins UnpackScalesK4(const uint8_t* s) {
  uint32_t u[3];
  std::memcpy(u, s, 12);
  constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
  const uint32_t sc[2] = {u[0] & kLow6, (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4)};
  const uint32_t mn[2] = {u[1] & kLow6, ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4)};
  ScalesMins out;
  std::memcpy(out.sc, sc, 8);
  std::memcpy(out.mn, mn, 8);
  return out;
}


// Q4_K in llama.cpp's repacked order (vec_dot_avx2_k.cc): whole integer sums into two floats
// per (row, token), once per super-block (GEMV) or once per 64-element pair (kPerPair, GEMM),
// with the rows as lanes (tile_x86.h): per super-block (or 64-element pair)
// the whole integer sums of 4 rows reduce together and one vector FMA advances all 4 rows'
// floats; lane r does exactly the vec-dot's scalar std::fma steps for row r.
template <bool kPerPair>
struct Q4KRows {
  template <int R, int T>
  struct Shape {
    COHORT_TARGET_AVX512 static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                         int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
      const __m256i low_mask = _mm256_set1_epi8(0x0f);
      __m128 acc[T], acc_min[T];
      for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm_setzero_ps();
      for (int64_t i = 0; i < n / kQK_K; ++i) {
        const BlockQ8_K* y[T];
        for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
        const BlockQ4_K* x[R];
        ScalesMins sm[R];
        __m128i d_half = _mm_setzero_si128(), dmin_half = _mm_setzero_si128();
        for (int r = 0; r < R; ++r) {
          x[r] = reinterpret_cast<const BlockQ4_K*>(w + r * w_stride) + i;
          const uint8_t* next = w + (r + R) * w_stride + i * sizeof(BlockQ4_K);  // the next tile
          for (int line = 0; line < 3; ++line) x86::PrefetchNextTile(next + 64 * line);
          sm[r] = UnpackScalesK4(x[r]->scales);
          d_half = x86::InsertHalf(d_half, x[r]->d, r);
          dmin_half = x86::InsertHalf(dmin_half, x[r]->dmin, r);
        }
        const __m128 d = _mm_cvtph_ps(d_half), dmin = _mm_cvtph_ps(dmin_half);
        __m256i sum[T][R];
        for (int t = 0; t < T; ++t) {
          for (int r = 0; r < R; ++r) sum[t][r] = _mm256_setzero_si256();
        }
        for (int c = 0; c < 4; ++c) {
          for (int r = 0; r < R; ++r) {
            const __m256i q = Load32(x[r]->qs + 32 * c);
            const __m256i lo = _mm256_and_si256(q, low_mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low_mask);
            const __m256i s_lo = _mm256_set1_epi16(sm[r].sc[2 * c]);
            const __m256i s_hi = _mm256_set1_epi16(sm[r].sc[2 * c + 1]);
            for (int t = 0; t < T; ++t) {
              sum[t][r] = _mm256_dpwssd_epi32(sum[t][r], _mm256_maddubs_epi16(lo, Load32(y[t]->qs + 64 * c)), s_lo);
              sum[t][r] = _mm256_dpwssd_epi32(sum[t][r], _mm256_maddubs_epi16(hi, Load32(y[t]->qs + 64 * c + 32)), s_hi);
            }
          }
          if constexpr (kPerPair) {
            for (int t = 0; t < T; ++t) {
              const int16_t* bs = y[t]->bsums + 4 * c;
              __m128i pm = _mm_setzero_si128();
              for (int r = 0; r < R; ++r) {
                pm = x86::InsertInt(pm, sm[r].mn[2 * c] * (bs[0] + bs[1]) + sm[r].mn[2 * c + 1] * (bs[2] + bs[3]), r);
              }
              const __m128 yd = _mm_set1_ps(y[t]->d);
              acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(x86::Reduce4<R>(sum[t])), _mm_mul_ps(d, yd), acc[t]);
              acc_min[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(pm), _mm_mul_ps(dmin, yd), acc_min[t]);
              for (int r = 0; r < R; ++r) sum[t][r] = _mm256_setzero_si256();
            }
          }
        }
        if constexpr (!kPerPair) {
          for (int t = 0; t < T; ++t) {
            const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->bsums));
            __m256i mins[R];
            for (int r = 0; r < R; ++r) {
              uint64_t m8;
              std::memcpy(&m8, sm[r].mn, 8);
              const __m128i m = _mm_cvtsi64_si128(static_cast<long long>(m8));
              mins[r] = _mm256_madd_epi16(bs, _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m, m)));
            }
            const __m128 yd = _mm_set1_ps(y[t]->d);
            acc[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(x86::Reduce4<R>(sum[t])), _mm_mul_ps(d, yd), acc[t]);
            acc_min[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(x86::Reduce4<R>(mins)), _mm_mul_ps(dmin, yd), acc_min[t]);
          }
        }
      }
      for (int t = 0; t < T; ++t) x86::StoreLanes<R>(_mm_sub_ps(acc[t], acc_min[t]), out + t * out_stride);
    }
  };
};

template <int R, int T>
struct Q6K {
  COHORT_TARGET_AVX512 static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                       int64_t act_stride, int64_t n, float* out, int64_t out_stride) {
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
    const __m256i high_mask = _mm256_set1_epi8(0x30);
    // pair_index[j]: int16 lanes 0..7 take scale 2j, lanes 8..15 scale 2j + 1.
    __m256i pair_index[8];
    for (int j = 0; j < 8; ++j) {
      pair_index[j] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(2 * j + 1)),
                                       _mm_set1_epi16(static_cast<int16_t>(2 * j)));
    }
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / kQK_K; ++i) {
      const BlockQ8_K* y[T];
      for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
      const BlockQ6_K* x[R];
      for (int r = 0; r < R; ++r) {
        x[r] = reinterpret_cast<const BlockQ6_K*>(w + r * w_stride) + i;
        const uint8_t* next = w + (r + 2 * R) * w_stride + i * sizeof(BlockQ6_K);  // the next tile
        for (int line = 0; line < 4; ++line) x86::PrefetchNextTile(next + 64 * line);
      }
      // As vec_dot_avx2_k.cc: the -32 offset leaves lane m as 32 * (bsums[2m] * s[2m] +
      // bsums[2m+1] * s[2m+1]), taken off the lane sums at the end.
      __m256i sum[R][T];
      __m256i scales16[R];  // the 16 scales as int16; vpermw picks each group's pair
      for (int r = 0; r < R; ++r) {
        scales16[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[r]->scales)));
        for (int t = 0; t < T; ++t) {
          const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->bsums));
          sum[r][t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(bsums, scales16[r]), 5));
        }
      }
      for (int h = 0; h < 2; ++h) {
        for (int g = 0; g < 4; ++g) {  // 32 elements: scales 8h + 2g and 8h + 2g + 1
          __m256i yq[T];
          for (int t = 0; t < T; ++t) yq[t] = Load32(y[t]->qs + 128 * h + 32 * g);
          for (int r = 0; r < R; ++r) {
            const __m256i ql = Load32(x[r]->ql + 64 * h + 32 * (g & 1));
            const __m256i qh = Load32(x[r]->qh + 32 * h);
            // Bits 2g, 2g + 1 of each qh byte moved to bits 4, 5 by one 16-bit shift (the bits
            // it carries across bytes are masked off), then u = (low nibble) | high in one
            // ternary-logic op: fewer instructions for the single-token (memory-bound) case.
            const __m256i high = _mm256_and_si256(
                g == 0 ? _mm256_slli_epi16(qh, 4) : g == 1 ? _mm256_slli_epi16(qh, 2) : g == 2 ? qh : _mm256_srli_epi16(qh, 2),
                high_mask);
            const __m256i u = _mm256_ternarylogic_epi32(g < 2 ? ql : _mm256_srli_epi16(ql, 4), low_mask, high, 0xea);
            const __m256i sp = _mm256_permutexvar_epi16(pair_index[4 * h + g], scales16[r]);
            for (int t = 0; t < T; ++t) {
              sum[r][t] = _mm256_dpwssd_epi32(sum[r][t], _mm256_maddubs_epi16(u, yq[t]), sp);
            }
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const float d = HalfToFloat(x[r]->d);
        for (int t = 0; t < T; ++t) {
          acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t]->d * d), _mm256_cvtepi32_ps(sum[r][t]), acc[r][t]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) out[t * out_stride + r] = x86::HorizontalSum(acc[r][t]);
    }
  }
};

}  // namespace

TileFn GetKTile(DType weight) {
  switch (weight) {
    case DType::kQ4_K: return TileTable<Q4KRows<false>::Shape>::Run;
    case DType::kQ6_K: return TileTable<Q6K>::Run;
    default: return nullptr;
  }
}

TileFn GetKTileGrouped(DType weight) {
  return weight == DType::kQ4_K ? TileTable<Q4KRows<true>::Shape>::Run : GetKTile(weight);
}

#endif

}  // namespace cohort::kernels::avx512
