// AVX-512 versions of the float ops the attention inner loops call (dot products of a query
// with cached keys, the weighted sum of cached values), chosen at run time by ops.cc. Each
// keeps its scalar twin's arithmetic: dot products accumulate products of floats in double
// (only the order of the double additions differs, far below float rounding), and AddScaled
// rounds s * x before the add, as the scalar loop does (no FMA contraction).
// GCC 12's avx512fintrin.h seeds several intrinsics with a self-initialised "undefined"
// vector and then warns about it (a false positive); keep -Werror for everything else.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <limits>

#include "kernels/ops_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)

namespace {

// 8 floats (from `p`, or 8 halves) widened to double; the first `left` lanes when left < 8.
template <bool kHalf>
COHORT_TARGET_AVX512 inline __m512d Load8AsDouble(const void* p, int64_t i, __mmask8 mask) {
  if constexpr (kHalf) {
    const __m128i h = _mm_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(p) + i);
    return _mm512_cvtps_pd(_mm256_cvtph_ps(h));
  } else {
    return _mm512_cvtps_pd(_mm256_maskz_loadu_ps(mask, static_cast<const float*>(p) + i));
  }
}

template <bool kHalf>
COHORT_TARGET_AVX512 float DotDouble(const void* a, const float* b, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  const __mmask8 all = 0xff;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm512_fmadd_pd(Load8AsDouble<kHalf>(a, i, all), Load8AsDouble<false>(b, i, all), acc0);
    acc1 = _mm512_fmadd_pd(Load8AsDouble<kHalf>(a, i + 8, all), Load8AsDouble<false>(b, i + 8, all), acc1);
  }
  for (; i < n; i += 8) {
    const int64_t left = n - i;
    const __mmask8 mask = left >= 8 ? all : static_cast<__mmask8>((1u << left) - 1);
    acc0 = _mm512_fmadd_pd(Load8AsDouble<kHalf>(a, i, mask), Load8AsDouble<false>(b, i, mask), acc0);
  }
  double lanes[8];
  _mm512_storeu_pd(lanes, _mm512_add_pd(acc0, acc1));
  double sum = 0.0;
  for (double v : lanes) sum += v;
  return static_cast<float>(sum);
}

COHORT_TARGET_AVX512 void AddScaledImpl(const float* x, float s, int64_t n, float* y) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 p = _mm512_mul_ps(vs, _mm512_loadu_ps(x + i));
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), p));
  }
  for (; i < n; ++i) y[i] += s * x[i];
}

COHORT_TARGET_AVX512 void AddScaledF16Impl(const uint16_t* x, float s, int64_t n, float* y) {
  const __m512 vs = _mm512_set1_ps(s);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 xf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_mul_ps(vs, xf)));
  }
  for (; i < n; ++i) y[i] += s * x86::HalfToFloat(x[i]);
}

// DotDouble<true>'s 8 double lanes (acc0 + acc1) for one row of halves against q, already in
// double (qd, n a multiple of 8): the same FMAs in the same order, q read from memory.
COHORT_TARGET_AVX512 __attribute__((always_inline)) inline __m512d DotF16Lanes(const uint16_t* a, const double* qd, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 k = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)));
    acc0 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(k)), _mm512_load_pd(qd + i), acc0);
    acc1 = _mm512_fmadd_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(k), 1))),
                           _mm512_load_pd(qd + i + 8), acc1);
  }
  if (i < n) {
    const __m256 k = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    acc0 = _mm512_fmadd_pd(_mm512_cvtps_pd(k), _mm512_load_pd(qd + i), acc0);
  }
  return _mm512_add_pd(acc0, acc1);
}

// The sequential sum 0 + l[0] + ... + l[7] of each of 8 rows' lanes, as DotDouble ends: the
// 8 x 8 block is transposed so that one vector add does one step for all 8 rows.
COHORT_TARGET_AVX512 __attribute__((always_inline)) inline __m512d SumLanes8(const __m512d l[8]) {
  __m512d t[8], u[8];
  for (int j = 0; j < 4; ++j) {
    t[2 * j] = _mm512_unpacklo_pd(l[2 * j], l[2 * j + 1]);  // even lanes of rows 2j, 2j + 1
    t[2 * j + 1] = _mm512_unpackhi_pd(l[2 * j], l[2 * j + 1]);
  }
  // u[4h + m]: rows 4h..4h+3, lanes m and m + 4 (m = 0..3).
  for (int j = 0; j < 2; ++j) {
    u[4 * j + 0] = _mm512_shuffle_f64x2(t[4 * j + 0], t[4 * j + 2], 0x88);
    u[4 * j + 1] = _mm512_shuffle_f64x2(t[4 * j + 1], t[4 * j + 3], 0x88);
    u[4 * j + 2] = _mm512_shuffle_f64x2(t[4 * j + 0], t[4 * j + 2], 0xdd);
    u[4 * j + 3] = _mm512_shuffle_f64x2(t[4 * j + 1], t[4 * j + 3], 0xdd);
  }
  // col[c] lane r = l[r] lane c.
  __m512d col[8];
  for (int j = 0; j < 4; ++j) {
    col[j] = _mm512_shuffle_f64x2(u[j], u[4 + j], 0x88);
    col[4 + j] = _mm512_shuffle_f64x2(u[j], u[4 + j], 0xdd);
  }
  __m512d sum = _mm512_setzero_pd();
  for (int c = 0; c < 8; ++c) sum = _mm512_add_pd(sum, col[c]);
  return sum;
}

// DotsF16's rows against q already in double (qd): 8 rows at a time reduced together, the
// rest one by one. kN > 0 fixes n at compile time (the loop over it unrolled); 0 takes n.
template <int64_t kN>
COHORT_TARGET_AVX512 void DotsF16Rows(const uint16_t* rows, int64_t row_stride, int64_t n_rows,
                                      const double* qd, int64_t n, float scale, float* scores) {
  if constexpr (kN > 0) n = kN;
  int64_t p = 0;
  for (; p + 8 <= n_rows; p += 8) {
    __m512d lanes[8];
    for (int r = 0; r < 8; ++r) lanes[r] = DotF16Lanes(rows + (p + r) * row_stride, qd, n);
    const __m256 dots = _mm512_cvtpd_ps(SumLanes8(lanes));
    _mm256_storeu_ps(scores + p, _mm256_mul_ps(dots, _mm256_set1_ps(scale)));
  }
  for (; p < n_rows; ++p) {
    double lanes[8];
    _mm512_storeu_pd(lanes, DotF16Lanes(rows + p * row_stride, qd, n));
    double sum = 0.0;
    for (double v : lanes) sum += v;
    scores[p] = static_cast<float>(sum) * scale;
  }
}

COHORT_TARGET_AVX512 void DotsF16Impl(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q,
                                      int64_t n, float scale, float* scores) {
  constexpr int64_t kMaxN = 512;
  if (n % 8 != 0 || n > kMaxN) {
    for (int64_t p = 0; p < n_rows; ++p) scores[p] = DotDouble<true>(rows + p * row_stride, q, n) * scale;
    return;
  }
  alignas(64) double qd[kMaxN];
  for (int64_t i = 0; i < n; i += 8) _mm512_store_pd(qd + i, _mm512_cvtps_pd(_mm256_loadu_ps(q + i)));
  // The common head sizes get a copy with the loop over n unrolled.
  switch (n) {
    case 64: return DotsF16Rows<64>(rows, row_stride, n_rows, qd, n, scale, scores);
    case 128: return DotsF16Rows<128>(rows, row_stride, n_rows, qd, n, scale, scores);
    default: return DotsF16Rows<0>(rows, row_stride, n_rows, qd, n, scale, scores);
  }
}

// AddScaledF16 over the rows in order into a zeroed out, with up to 8 vectors of out held in
// registers across all the rows instead of loaded and stored for each.
COHORT_TARGET_AVX512 void WeightedRowSumF16Impl(const float* w, const uint16_t* rows, int64_t row_stride,
                                                int64_t n_rows, int64_t n, float* out) {
  constexpr int64_t kSpan = 128;
  int64_t j0 = 0;
  for (; j0 + 16 <= n; j0 += kSpan) {
    const int vecs = static_cast<int>(std::min<int64_t>(kSpan, n - j0) / 16);
    __m512 acc[kSpan / 16];
    for (int v = 0; v < kSpan / 16; ++v) acc[v] = _mm512_setzero_ps();
    for (int64_t p = 0; p < n_rows; ++p) {
      const uint16_t* x = rows + p * row_stride + j0;
      const __m512 s = _mm512_set1_ps(w[p]);
      for (int v = 0; v < kSpan / 16; ++v) {
        if (v < vecs) {
          const __m512 xf = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * v)));
          acc[v] = _mm512_add_ps(acc[v], _mm512_mul_ps(s, xf));
        }
      }
    }
    for (int v = 0; v < vecs; ++v) _mm512_storeu_ps(out + j0 + 16 * v, acc[v]);
    if (vecs < kSpan / 16) {
      j0 += 16 * vecs;
      break;
    }
  }
  if (j0 < n) {
    std::fill(out + j0, out + n, 0.0f);
    for (int64_t p = 0; p < n_rows; ++p) {
      for (int64_t j = j0; j < n; ++j) out[j] += w[p] * x86::HalfToFloat(rows[p * row_stride + j]);
    }
  }
}

// DotsF16Heads for n = 16 * kSteps: each key row is widened to double once and dotted with
// every head's query (the heads of a GQA group share their keys), in DotDouble's order.
template <int kSteps>
COHORT_TARGET_AVX512 void DotsF16HeadsFixed(const uint16_t* rows, int64_t row_stride, int64_t n_rows,
                                            const double* qd, int n_heads, float scale, float* scores,
                                            int64_t scores_stride) {
  constexpr int64_t n = 16 * kSteps;
  constexpr int kMaxHeads = 8;
  alignas(64) double lanes[kMaxHeads][8][8];
  for (int64_t p0 = 0; p0 < n_rows; p0 += 8) {
    const int block = static_cast<int>(std::min<int64_t>(8, n_rows - p0));
    for (int r = 0; r < block; ++r) {
      const uint16_t* a = rows + (p0 + r) * row_stride;
      __m512d k[2 * kSteps];
      for (int m = 0; m < kSteps; ++m) {
        const __m512 h = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 16 * m)));
        k[2 * m] = _mm512_cvtps_pd(_mm512_castps512_ps256(h));
        k[2 * m + 1] = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(h), 1)));
      }
      for (int hd = 0; hd < n_heads; ++hd) {
        const double* q = qd + hd * n;
        __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
        for (int m = 0; m < kSteps; ++m) {
          acc0 = _mm512_fmadd_pd(k[2 * m], _mm512_load_pd(q + 16 * m), acc0);
          acc1 = _mm512_fmadd_pd(k[2 * m + 1], _mm512_load_pd(q + 16 * m + 8), acc1);
        }
        _mm512_store_pd(lanes[hd][r], _mm512_add_pd(acc0, acc1));
      }
    }
    for (int hd = 0; hd < n_heads; ++hd) {
      float* out = scores + hd * scores_stride + p0;
      if (block == 8) {
        __m512d l[8];
        for (int r = 0; r < 8; ++r) l[r] = _mm512_load_pd(lanes[hd][r]);
        _mm256_storeu_ps(out, _mm256_mul_ps(_mm512_cvtpd_ps(SumLanes8(l)), _mm256_set1_ps(scale)));
      } else {
        for (int r = 0; r < block; ++r) {
          double sum = 0.0;
          for (double v : lanes[hd][r]) sum += v;
          out[r] = static_cast<float>(sum) * scale;
        }
      }
    }
  }
}

COHORT_TARGET_AVX512 void DotsF16HeadsImpl(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q,
                                           int64_t q_stride, int n_heads, int64_t n, float scale, float* scores,
                                           int64_t scores_stride) {
  if ((n == 64 || n == 128) && n_heads > 1 && n_heads <= 8) {
    alignas(64) double qd[8 * 128];
    for (int hd = 0; hd < n_heads; ++hd) {
      for (int64_t i = 0; i < n; i += 8) _mm512_store_pd(qd + hd * n + i, _mm512_cvtps_pd(_mm256_loadu_ps(q + hd * q_stride + i)));
    }
    if (n == 64) return DotsF16HeadsFixed<4>(rows, row_stride, n_rows, qd, n_heads, scale, scores, scores_stride);
    return DotsF16HeadsFixed<8>(rows, row_stride, n_rows, qd, n_heads, scale, scores, scores_stride);
  }
  for (int hd = 0; hd < n_heads; ++hd) {
    DotsF16Impl(rows, row_stride, n_rows, q + hd * q_stride, n, scale, scores + hd * scores_stride);
  }
}

// WeightedRowSumF16 for several heads sharing the value rows: each row's span of 64 values
// is widened once and added into up to 4 heads' registers.
COHORT_TARGET_AVX512 void WeightedRowSumF16HeadsImpl(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                                                     int64_t row_stride, int64_t n_rows, int64_t n, float* out,
                                                     int64_t out_stride) {
  constexpr int kVecs = 4, kHeads = 4;
  if (n % (16 * kVecs) != 0 || n_heads == 1) {
    for (int hd = 0; hd < n_heads; ++hd) {
      WeightedRowSumF16Impl(w + hd * w_stride, rows, row_stride, n_rows, n, out + hd * out_stride);
    }
    return;
  }
  for (int h0 = 0; h0 < n_heads; h0 += kHeads) {
    const int heads = std::min(kHeads, n_heads - h0);
    for (int64_t j0 = 0; j0 < n; j0 += 16 * kVecs) {
      __m512 acc[kHeads][kVecs];
      for (int hd = 0; hd < kHeads; ++hd) {
        for (int v = 0; v < kVecs; ++v) acc[hd][v] = _mm512_setzero_ps();
      }
      for (int64_t p = 0; p < n_rows; ++p) {
        const uint16_t* x = rows + p * row_stride + j0;
        __m512 xf[kVecs];
        for (int v = 0; v < kVecs; ++v) {
          xf[v] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 16 * v)));
        }
        for (int hd = 0; hd < kHeads; ++hd) {
          if (hd < heads) {
            const __m512 s = _mm512_set1_ps(w[(h0 + hd) * w_stride + p]);
            for (int v = 0; v < kVecs; ++v) acc[hd][v] = _mm512_add_ps(acc[hd][v], _mm512_mul_ps(s, xf[v]));
          }
        }
      }
      for (int hd = 0; hd < heads; ++hd) {
        for (int v = 0; v < kVecs; ++v) _mm512_storeu_ps(out + (h0 + hd) * out_stride + j0 + 16 * v, acc[hd][v]);
      }
    }
  }
}

// ExpPoly (ops.cc) on 16 lanes with the same fused operations, so each lane is bit-identical:
// vscalefps scales by 2^n with one correct rounding, as ldexp does (subnormals included).
COHORT_TARGET_AVX512 inline __m512 ExpPoly16(__m512 x) {
  const __m512 shifter = _mm512_set1_ps(0x1.8p23f);
  const __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shifter), shifter);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                    _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 j = _mm512_fmadd_ps(
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
      u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 scaled = _mm512_scalef_ps(j, n);
  // Out of range (|n| > 192) or NaN: 0 when n <= 0, else +inf.
  const __mmask16 special = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ) |
                            _mm512_cmp_ps_mask(n, n, _CMP_UNORD_Q);
  const __mmask16 low = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 limit = _mm512_mask_blend_ps(low, _mm512_set1_ps(__builtin_inff()), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(special, scaled, limit);
}

// The 16 lanes summed halves, quarters, pairs — the order Softmax's scalar loop uses.
COHORT_TARGET_AVX512 inline float PairwiseSum16(__m512 v) {
  const __m256 lo = _mm512_castps512_ps256(v);
  const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
  return x86::HorizontalSum(_mm256_add_ps(lo, hi));
}

COHORT_TARGET_AVX512 float MaxImpl(const float* x, int64_t n) {
  // max_ps returns its second operand when either is NaN: a NaN x leaves acc as it was.
  __m512 acc = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(_mm512_loadu_ps(x + i), acc);
  // Reduced through memory: GCC 12 warns (falsely) inside _mm512_reduce_max_ps.
  float lanes[16];
  _mm512_storeu_ps(lanes, acc);
  float max = lanes[0];
  for (int k = 1; k < 16; ++k) max = std::max(max, lanes[k]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  return max;
}

COHORT_TARGET_AVX512 double ExpChunksImpl(float* x, int64_t n_chunks, float max) {
  const __m512 vmax = _mm512_set1_ps(max);
  double sum = 0.0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    const __m512 e = ExpPoly16(_mm512_sub_ps(_mm512_loadu_ps(x + 16 * c), vmax));
    _mm512_storeu_ps(x + 16 * c, e);
    sum += static_cast<double>(PairwiseSum16(e));
  }
  return sum;
}

COHORT_TARGET_AVX512 void SwiGluChunksImpl(const float* gate, const float* up, int64_t n_chunks, float* out) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t c = 0; c < n_chunks; ++c) {
    const __m512 g = _mm512_loadu_ps(gate + 16 * c);
    const __m512 neg = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(g), _mm512_set1_epi32(INT32_MIN)));
    const __m512 e = ExpPoly16(neg);
    _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + 16 * c)));
  }
}

}  // namespace

float Max(const float* x, int64_t n) { return MaxImpl(x, n); }
double ExpChunks(float* x, int64_t n_chunks, float max) { return ExpChunksImpl(x, n_chunks, max); }
void SwiGluChunks(const float* gate, const float* up, int64_t n_chunks, float* out) {
  SwiGluChunksImpl(gate, up, n_chunks, out);
}

float Dot(const float* a, const float* b, int64_t n) { return DotDouble<false>(a, b, n); }
float DotF16(const uint16_t* a, const float* b, int64_t n) { return DotDouble<true>(a, b, n); }
void AddScaled(const float* x, float s, int64_t n, float* y) { AddScaledImpl(x, s, n, y); }
void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y) { AddScaledF16Impl(x, s, n, y); }
void DotsF16Heads(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q, int64_t q_stride,
                  int n_heads, int64_t n, float scale, float* scores, int64_t scores_stride) {
  DotsF16HeadsImpl(rows, row_stride, n_rows, q, q_stride, n_heads, n, scale, scores, scores_stride);
}
void WeightedRowSumF16Heads(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                            int64_t row_stride, int64_t n_rows, int64_t n, float* out, int64_t out_stride) {
  WeightedRowSumF16HeadsImpl(w, w_stride, n_heads, rows, row_stride, n_rows, n, out, out_stride);
}

#endif

}  // namespace cohort::kernels::avx512
