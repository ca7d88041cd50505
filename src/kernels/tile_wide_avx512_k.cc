// AVX-512 (VNNI) wide tile kernels (tile_wide.h) for Q4_K against Q8_K activations, 16 rows as
// the lanes of a zmm register. Per lane they reproduce VecDotQ4_KRepacked (vec_dot_avx2_k.cc):
// the same exact integer sums (scaled quants; mins times the activation's sums of 16), then
// acc = fma(sum, d_w * d_a, acc) and acc_min = fma(min_sum, dmin_w * d_a, acc_min) once per
// super-block (GEMV order) or once per 64 elements (kPerPair, the repacked GEMM's order).
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::LoadInt;

// Side data of a Q8_K row: per super-block 4 words, word k = the int16 pair (bsum pair 2k,
// bsum pair 2k + 1), where bsum pair j = bsums[2j] + bsums[2j + 1] covers sub-block j (32
// elements): dpwssd against the rows' (min 2k, min 2k + 1) pairs gives the mins term.
constexpr int kQ8KSideWords = 4;

void SideQ8_K(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act_row);
  auto* out = reinterpret_cast<uint32_t*>(side);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int k = 0; k < kQ8KSideWords; ++k) {
      const int16_t* bs = y[i].bsums + 4 * k;
      const auto lo = static_cast<uint16_t>(bs[0] + bs[1]);
      const auto hi = static_cast<uint16_t>(bs[2] + bs[3]);
      out[i * kQ8KSideWords + k] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
}

// Lanes of 4 bytes b0..b3 -> the int16 pairs (b0, b1) (half 0) or (b2, b3) (half 1).
template <int kHalf>
COHORT_TARGET_AVX512 inline __m512i BytePairs(__m512i v) {
  const __m512i byte = _mm512_set1_epi32(0xff);
  if constexpr (kHalf == 0) {
    return _mm512_or_si512(_mm512_and_si512(v, byte), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(v, 8), byte), 16));
  } else {
    return _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(v, 16), byte), _mm512_slli_epi32(_mm512_srli_epi32(v, 24), 16));
  }
}

// A super-block's per-row constants, lane r for row r.
struct Q4KHead {
  __m512 d, dmin;
  __m512i sc[8];    // the 8 six-bit scales as int32
  __m512i mins[4];  // (min 2k, min 2k + 1) as int16 pairs
};

COHORT_TARGET_AVX512 inline void LoadHead(const x86::WideRows& rows, int64_t off, Q4KHead* h) {
  __m512i head[4];  // words 0..3 of each row's block: d | dmin << 16, then the 12 scale bytes
  rows.Load16x16(off, head);
  h->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head[0]));
  h->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(head[0], 16)));
  const __m512i low6 = _mm512_set1_epi8(0x3f), low4 = _mm512_set1_epi8(0x0f), low2 = _mm512_set1_epi8(0x03);
  const __m512i u0 = head[1], u1 = head[2], u2 = head[3];
  // As UnpackScalesK4 (tile_avx512_k.cc), 16 rows at once.
  const __m512i sc_lo = _mm512_and_si512(u0, low6);
  const __m512i sc_hi = _mm512_or_si512(_mm512_and_si512(u2, low4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), low2), 4));
  const __m512i mn_lo = _mm512_and_si512(u1, low6);
  const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), low4),
                                        _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), low2), 4));
  const __m512i byte = _mm512_set1_epi32(0xff);
  h->sc[0] = _mm512_and_si512(sc_lo, byte);
  h->sc[1] = _mm512_and_si512(_mm512_srli_epi32(sc_lo, 8), byte);
  h->sc[2] = _mm512_and_si512(_mm512_srli_epi32(sc_lo, 16), byte);
  h->sc[3] = _mm512_srli_epi32(sc_lo, 24);
  h->sc[4] = _mm512_and_si512(sc_hi, byte);
  h->sc[5] = _mm512_and_si512(_mm512_srli_epi32(sc_hi, 8), byte);
  h->sc[6] = _mm512_and_si512(_mm512_srli_epi32(sc_hi, 16), byte);
  h->sc[7] = _mm512_srli_epi32(sc_hi, 24);
  h->mins[0] = BytePairs<0>(mn_lo);
  h->mins[1] = BytePairs<1>(mn_lo);
  h->mins[2] = BytePairs<0>(mn_hi);
  h->mins[3] = BytePairs<1>(mn_hi);
}

template <bool kPerPair, int T>
COHORT_TARGET_AVX512 void WideQ4K(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                  int64_t act_stride, const float* side, int64_t side_stride,
                                  int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK_K;
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  const x86::WideRows rows(w, w_stride);
  __m512 acc[T], acc_min[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ4_K));
    rows.PrefetchNext(i, sizeof(BlockQ4_K));
    Q4KHead h;
    LoadHead(rows, off, &h);
    const BlockQ8_K* y[T];
    const int32_t* pairs[T];
    for (int t = 0; t < T; ++t) {
      y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
      pairs[t] = reinterpret_cast<const int32_t*>(side + t * side_stride) + i * kQ8KSideWords;
    }
    __m512i sum[T];
    for (int t = 0; t < T; ++t) sum[t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {  // 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high)
      __m512i sub_lo[T], sub_hi[T];
      for (int t = 0; t < T; ++t) sub_lo[t] = sub_hi[t] = _mm512_setzero_si512();
      for (int half = 0; half < 2; ++half) {
        __m512i q[4];  // q[j] lane r: row r's qs bytes 32c + 16 half + 4j ..
        rows.Load16x16(off + 16 + 32 * c + 16 * half, q);
        for (int j = 0; j < 4; ++j) {
          const __m512i lo = _mm512_and_si512(q[j], low_mask);
          const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(q[j], 4), low_mask);
          const int e = 64 * c + 16 * half + 4 * j;
          for (int t = 0; t < T; ++t) {
            sub_lo[t] = _mm512_dpbusd_epi32(sub_lo[t], lo, _mm512_set1_epi32(LoadInt(y[t]->qs + e)));
            sub_hi[t] = _mm512_dpbusd_epi32(sub_hi[t], hi, _mm512_set1_epi32(LoadInt(y[t]->qs + e + 32)));
          }
        }
      }
      for (int t = 0; t < T; ++t) {
        const __m512i s = _mm512_add_epi32(_mm512_mullo_epi32(sub_lo[t], h.sc[2 * c]),
                                           _mm512_mullo_epi32(sub_hi[t], h.sc[2 * c + 1]));
        if constexpr (kPerPair) {
          const __m512 yd = _mm512_set1_ps(y[t]->d);
          const __m512i pm = _mm512_dpwssd_epi32(_mm512_setzero_si512(), h.mins[c], _mm512_set1_epi32(pairs[t][c]));
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(h.d, yd), acc[t]);
          acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pm), _mm512_mul_ps(h.dmin, yd), acc_min[t]);
        } else {
          sum[t] = _mm512_add_epi32(sum[t], s);
        }
      }
    }
    if constexpr (!kPerPair) {
      for (int t = 0; t < T; ++t) {
        __m512i m = _mm512_setzero_si512();
        for (int k = 0; k < kQ8KSideWords; ++k) m = _mm512_dpwssd_epi32(m, h.mins[k], _mm512_set1_epi32(pairs[t][k]));
        const __m512 yd = _mm512_set1_ps(y[t]->d);
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[t]), _mm512_mul_ps(h.d, yd), acc[t]);
        acc_min[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(h.dmin, yd), acc_min[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, _mm512_sub_ps(acc[t], acc_min[t]));
}

template <bool kPerPair>
struct Q4KKernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ4K<kPerPair, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

// Tokens per call: 4 keeps the per-token integer sums in registers.
constexpr int kQ4KTokens = 4;

}  // namespace

WideTile GetWideTileK(DType weight, bool grouped) {
  if (weight != DType::kQ4_K) return {};
  const WideTileFn fn = grouped ? x86::WideRun<Q4KKernel<true>::Shape, kQ4KTokens>
                                : x86::WideRun<Q4KKernel<false>::Shape, kQ4KTokens>;
  return {fn, SideQ8_K, kQ8KSideWords, kQ4KTokens};
}

#else

WideTile GetWideTileK(DType, bool) { return {}; }

#endif

}  // namespace cohort::kernels::avx512
