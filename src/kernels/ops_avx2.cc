// AVX2 (+FMA, F16C) versions of the float ops ops.cc dispatches (attention's dot products of
// a query with cached keys and the weighted sum of cached values, softmax, SwiGLU), chosen at
// run time when the level is AVX2 or AVX-VNNI. They keep the promises of ops_avx512.cc: dot
// products accumulate products of floats in double (only the order of the double additions
// differs from the scalar loop), AddScaled rounds s * x before the add (no FMA contraction:
// this file is compiled with -ffp-contract=off), and Softmax's and SwiGlu's 16-value chunks are
// the scalar loops' own operations, lane for lane, so they are bit-identical.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/ops_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)

namespace {

// 4 floats (or 4 halves) at p + i widened to double.
template <bool kHalf>
COHORT_TARGET_AVX2 inline __m256d Load4AsDouble(const void* p, int64_t i) {
  if constexpr (kHalf) {
    uint64_t bits;
    std::memcpy(&bits, static_cast<const uint16_t*>(p) + i, sizeof(bits));
    return _mm256_cvtps_pd(_mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(bits))));
  } else {
    return _mm256_cvtps_pd(_mm_loadu_ps(static_cast<const float*>(p) + i));
  }
}

// The first `left` (< 4) values at p + i widened to double, the other lanes 0.
template <bool kHalf>
COHORT_TARGET_AVX2 inline __m256d LoadPartAsDouble(const void* p, int64_t i, int64_t left) {
  if constexpr (kHalf) {
    uint16_t h[4] = {0, 0, 0, 0};
    std::memcpy(h, static_cast<const uint16_t*>(p) + i, static_cast<size_t>(left) * sizeof(uint16_t));
    return Load4AsDouble<true>(h, 0);
  } else {
    float f[4] = {0, 0, 0, 0};
    std::memcpy(f, static_cast<const float*>(p) + i, static_cast<size_t>(left) * sizeof(float));
    return Load4AsDouble<false>(f, 0);
  }
}

// The 4 double lanes summed in order: 0 + l[0] + l[1] + l[2] + l[3].
COHORT_TARGET_AVX2 inline double SumLanes(__m256d v) {
  double lanes[4];
  _mm256_storeu_pd(lanes, v);
  double sum = 0.0;
  for (double l : lanes) sum += l;
  return sum;
}

// sum a[i] * b[i] in double: 16 values a step into 4 accumulators of 4 lanes, the rest 4 at a
// time (the last part zero-padded) into the first; the accumulators added (0 + 1) + (2 + 3).
template <bool kHalf>
COHORT_TARGET_AVX2 __m256d DotDoubleLanes(const void* a, const float* b, int64_t n) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  __m256d acc2 = _mm256_setzero_pd(), acc3 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_pd(Load4AsDouble<kHalf>(a, i), Load4AsDouble<false>(b, i), acc0);
    acc1 = _mm256_fmadd_pd(Load4AsDouble<kHalf>(a, i + 4), Load4AsDouble<false>(b, i + 4), acc1);
    acc2 = _mm256_fmadd_pd(Load4AsDouble<kHalf>(a, i + 8), Load4AsDouble<false>(b, i + 8), acc2);
    acc3 = _mm256_fmadd_pd(Load4AsDouble<kHalf>(a, i + 12), Load4AsDouble<false>(b, i + 12), acc3);
  }
  for (; i + 4 <= n; i += 4) acc0 = _mm256_fmadd_pd(Load4AsDouble<kHalf>(a, i), Load4AsDouble<false>(b, i), acc0);
  if (i < n) {
    acc0 = _mm256_fmadd_pd(LoadPartAsDouble<kHalf>(a, i, n - i), LoadPartAsDouble<false>(b, i, n - i), acc0);
  }
  return _mm256_add_pd(_mm256_add_pd(acc0, acc1), _mm256_add_pd(acc2, acc3));
}

template <bool kHalf>
COHORT_TARGET_AVX2 float DotDouble(const void* a, const float* b, int64_t n) {
  return static_cast<float>(SumLanes(DotDoubleLanes<kHalf>(a, b, n)));
}

COHORT_TARGET_AVX2 void AddScaledImpl(const float* x, float s, int64_t n, float* y) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 p = _mm256_mul_ps(vs, _mm256_loadu_ps(x + i));
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), p));
  }
  for (; i < n; ++i) y[i] += s * x[i];
}

COHORT_TARGET_AVX2 inline __m256 Load8Halves(const uint16_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

COHORT_TARGET_AVX2 void AddScaledF16Impl(const uint16_t* x, float s, int64_t n, float* y) {
  const __m256 vs = _mm256_set1_ps(s);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_mul_ps(vs, Load8Halves(x + i))));
  }
  for (; i < n; ++i) y[i] += s * x86::HalfToFloat(x[i]);
}

// DotDouble<true>'s sum for n = 16 * kSteps, the query already widened to double (qd): the
// same FMAs into the same accumulators, each key row widened once for all the heads of a GQA
// group (`n_heads` queries at qd + h * 16 * kSteps).
template <int kSteps>
COHORT_TARGET_AVX2 void DotsF16HeadsFixed(const uint16_t* rows, int64_t row_stride, int64_t n_rows,
                                          const double* qd, int n_heads, float scale, float* scores,
                                          int64_t scores_stride) {
  constexpr int64_t n = 16 * kSteps;
  for (int64_t p = 0; p < n_rows; ++p) {
    const uint16_t* a = rows + p * row_stride;
    __m256d k[4 * kSteps];
    for (int m = 0; m < 2 * kSteps; ++m) {
      const __m256 h = Load8Halves(a + 8 * m);
      k[2 * m] = _mm256_cvtps_pd(_mm256_castps256_ps128(h));
      k[2 * m + 1] = _mm256_cvtps_pd(_mm256_extractf128_ps(h, 1));
    }
    for (int hd = 0; hd < n_heads; ++hd) {
      const double* q = qd + hd * n;
      __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
      for (int m = 0; m < kSteps; ++m) {
        for (int c = 0; c < 4; ++c) acc[c] = _mm256_fmadd_pd(k[4 * m + c], _mm256_loadu_pd(q + 16 * m + 4 * c), acc[c]);
      }
      const __m256d sum = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
      scores[hd * scores_stride + p] = static_cast<float>(SumLanes(sum)) * scale;
    }
  }
}

COHORT_TARGET_AVX2 void DotsF16HeadsImpl(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q,
                                         int64_t q_stride, int n_heads, int64_t n, float scale, float* scores,
                                         int64_t scores_stride) {
  constexpr int kMaxHeads = 8;
  if ((n == 64 || n == 128) && n_heads <= kMaxHeads) {
    alignas(32) double qd[kMaxHeads * 128];
    for (int hd = 0; hd < n_heads; ++hd) {
      for (int64_t i = 0; i < n; i += 4) {
        _mm256_store_pd(qd + hd * n + i, _mm256_cvtps_pd(_mm_loadu_ps(q + hd * q_stride + i)));
      }
    }
    if (n == 64) return DotsF16HeadsFixed<4>(rows, row_stride, n_rows, qd, n_heads, scale, scores, scores_stride);
    return DotsF16HeadsFixed<8>(rows, row_stride, n_rows, qd, n_heads, scale, scores, scores_stride);
  }
  for (int hd = 0; hd < n_heads; ++hd) {
    for (int64_t p = 0; p < n_rows; ++p) {
      scores[hd * scores_stride + p] = DotDouble<true>(rows + p * row_stride, q + hd * q_stride, n) * scale;
    }
  }
}

// AddScaledF16 of every row in order into a zeroed out: per value the same mul-then-add as
// the per-row calls, with a span of 64 values of up to 4 heads kept in registers across the
// rows (the heads of a GQA group share the value rows, each widened once).
COHORT_TARGET_AVX2 void WeightedRowSumF16HeadsImpl(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                                                   int64_t row_stride, int64_t n_rows, int64_t n, float* out,
                                                   int64_t out_stride) {
  constexpr int kVecs = 8, kHeads = 4;  // 8 * 8 = 64 values per span
  constexpr int64_t kSpan = 8 * kVecs;
  const int64_t n_spans = n / kSpan;
  for (int h0 = 0; h0 < n_heads; h0 += kHeads) {
    const int heads = std::min(kHeads, n_heads - h0);
    for (int64_t s = 0; s < n_spans; ++s) {
      const int64_t j0 = s * kSpan;
      if (heads == 1) {
        __m256 acc[kVecs];
        for (int v = 0; v < kVecs; ++v) acc[v] = _mm256_setzero_ps();
        for (int64_t p = 0; p < n_rows; ++p) {
          const uint16_t* x = rows + p * row_stride + j0;
          const __m256 sc = _mm256_set1_ps(w[h0 * w_stride + p]);
          for (int v = 0; v < kVecs; ++v) acc[v] = _mm256_add_ps(acc[v], _mm256_mul_ps(sc, Load8Halves(x + 8 * v)));
        }
        for (int v = 0; v < kVecs; ++v) _mm256_storeu_ps(out + h0 * out_stride + j0 + 8 * v, acc[v]);
        continue;
      }
      // Several heads: half a span (32 values) at a time keeps 4 heads' sums in 16 registers.
      for (int half = 0; half < 2; ++half) {
        const int64_t jh = j0 + 32 * half;
        __m256 acc[kHeads][4];
        for (int hd = 0; hd < kHeads; ++hd) {
          for (int v = 0; v < 4; ++v) acc[hd][v] = _mm256_setzero_ps();
        }
        for (int64_t p = 0; p < n_rows; ++p) {
          const uint16_t* x = rows + p * row_stride + jh;
          __m256 xf[4];
          for (int v = 0; v < 4; ++v) xf[v] = Load8Halves(x + 8 * v);
          for (int hd = 0; hd < kHeads; ++hd) {
            if (hd < heads) {
              const __m256 sc = _mm256_set1_ps(w[(h0 + hd) * w_stride + p]);
              for (int v = 0; v < 4; ++v) acc[hd][v] = _mm256_add_ps(acc[hd][v], _mm256_mul_ps(sc, xf[v]));
            }
          }
        }
        for (int hd = 0; hd < heads; ++hd) {
          for (int v = 0; v < 4; ++v) _mm256_storeu_ps(out + (h0 + hd) * out_stride + jh + 8 * v, acc[hd][v]);
        }
      }
    }
    // The values past the last whole span: row by row, as AddScaledF16 does.
    const int64_t j_tail = n_spans * kSpan;
    if (j_tail < n) {
      for (int hd = h0; hd < h0 + heads; ++hd) {
        float* o = out + hd * out_stride;
        std::fill(o + j_tail, o + n, 0.0f);
        for (int64_t p = 0; p < n_rows; ++p) {
          AddScaledF16Impl(rows + p * row_stride + j_tail, w[hd * w_stride + p], n - j_tail, o + j_tail);
        }
      }
    }
  }
}

// ExpPoly (ops.cc) on 8 lanes with the same fused operations. ldexp(j, n) is one correctly
// rounded scaling (into the subnormals too); here it is two multiplications by powers of two,
// 2^(n/2) and 2^(n - n/2): the first is exact (|n| <= 192 keeps j * 2^(n/2) normal), so the
// second rounds once, as ldexp does.
COHORT_TARGET_AVX2 inline __m256 ExpPoly8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(0x1.8p23f);
  const __m256 n = _mm256_sub_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shifter), shifter);
  const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
  // Out of range (|n| > 192) or NaN: 0 when n <= 0, else +inf (the lanes' integer n, which
  // is then meaningless, is clamped so the shifts below stay defined).
  const __m256 abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 special = _mm256_or_ps(_mm256_cmp_ps(abs_n, _mm256_set1_ps(192.0f), _CMP_GT_OQ),
                                      _mm256_cmp_ps(n, n, _CMP_UNORD_Q));
  const __m256i ni = _mm256_cvtps_epi32(_mm256_andnot_ps(special, n));  // n is an integer already
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  const __m256 scaled = _mm256_mul_ps(_mm256_mul_ps(j, p1), p2);
  const __m256 low = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
  const __m256 limit = _mm256_blendv_ps(_mm256_set1_ps(__builtin_inff()), _mm256_setzero_ps(), low);
  return _mm256_blendv_ps(scaled, limit, special);
}

COHORT_TARGET_AVX2 float MaxImpl(const float* x, int64_t n) {
  // max_ps returns its second operand when either is NaN: a NaN x leaves acc as it was.
  __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_max_ps(_mm256_loadu_ps(x + i), acc);
  float lanes[8];
  _mm256_storeu_ps(lanes, acc);
  float max = lanes[0];
  for (int k = 1; k < 8; ++k) max = std::max(max, lanes[k]);
  for (; i < n; ++i) max = std::max(max, x[i]);
  return max;
}

COHORT_TARGET_AVX2 double ExpChunksImpl(float* x, int64_t n_chunks, float max) {
  const __m256 vmax = _mm256_set1_ps(max);
  double sum = 0.0;
  for (int64_t c = 0; c < n_chunks; ++c) {
    float* p = x + 16 * c;
    const __m256 lo = ExpPoly8(_mm256_sub_ps(_mm256_loadu_ps(p), vmax));
    const __m256 hi = ExpPoly8(_mm256_sub_ps(_mm256_loadu_ps(p + 8), vmax));
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
    // The scalar loop's order: halves (lo + hi), quarters, pairs.
    sum += static_cast<double>(x86::HorizontalSum(_mm256_add_ps(lo, hi)));
  }
  return sum;
}

COHORT_TARGET_AVX2 void SwiGluChunksImpl(const float* gate, const float* up, int64_t n_chunks, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < 16 * n_chunks; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = ExpPoly8(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
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

}  // namespace cohort::kernels::avx2
