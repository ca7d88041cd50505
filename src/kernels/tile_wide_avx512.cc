// AVX-512 (VNNI) wide tile kernels (tile_wide.h): 16 rows as the 16 lanes of a zmm register.
// Q4_0 against Q8_0 activations reproduces VecDotQ4_0 (vec_dot_avx512.cc) per lane: per block
// the exact integer sum of (q - 8) * y, then acc = fma(float(sum), d_w * d_a, acc).
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

using x86::HalfToFloat;

// Side data of a Q8_0 activation row: per block, its scale as a float and -8 * sum(qs) (the
// term that turns dpbusd's unsigned nibbles q into q - 8), both shared by all rows.
struct Q8_0Side {
  float d;
  int32_t neg8_sum;
};
static_assert(sizeof(Q8_0Side) == 2 * sizeof(float));

void SideQ8_0(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  auto* out = reinterpret_cast<Q8_0Side*>(side);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[i].qs[j];
    out[i].d = HalfToFloat(y[i].d);
    out[i].neg8_sum = -8 * sum;
  }
}

template <int T>
COHORT_TARGET_AVX512 void WideQ4_0(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                   int64_t act_stride, const float* side, int64_t side_stride,
                                   int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK;
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
  const x86::WideRows rows(w, w_stride);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ4_0));
    rows.PrefetchNext(i, sizeof(BlockQ4_0));
    // q[c] lane r: bytes 4c..4c+3 of row r's qs (low nibbles: elements 4c.., high: 16+4c..).
    __m512i q[4];
    rows.Load16x16(off + 2, q);
    __m512i lo[4], hi[4];
    for (int c = 0; c < 4; ++c) {
      lo[c] = _mm512_and_si512(q[c], low_mask);
      hi[c] = _mm512_and_si512(_mm512_srli_epi16(q[c], 4), low_mask);
    }
    const __m512 dw = rows.Halves(off);
    for (int t = 0; t < T; ++t) {
      const auto& y = reinterpret_cast<const BlockQ8_0*>(act + t * act_stride)[i];
      const auto& s = reinterpret_cast<const Q8_0Side*>(side + t * side_stride)[i];
      const int32_t* y32 = reinterpret_cast<const int32_t*>(y.qs);
      __m512i sum_lo = _mm512_set1_epi32(s.neg8_sum);
      __m512i sum_hi = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        sum_lo = _mm512_dpbusd_epi32(sum_lo, lo[c], _mm512_set1_epi32(x86::LoadInt(y32 + c)));
        sum_hi = _mm512_dpbusd_epi32(sum_hi, hi[c], _mm512_set1_epi32(x86::LoadInt(y32 + 4 + c)));
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(s.d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(sum_lo, sum_hi)), d, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

template <int T>
struct Q4_0Kernel {
  static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                  const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
    WideQ4_0<T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
  }
};

}  // namespace

WideTile GetWideTile(DType weight, bool grouped) {
  switch (weight) {
    case DType::kQ4_0: return {x86::WideRun<Q4_0Kernel, kWideTokens>, SideQ8_0, 16, kWideTokens};
    default: return GetWideTileK(weight, grouped);
  }
}

#else

WideTile GetWideTile(DType, bool) { return {}; }

#endif

}  // namespace cohort::kernels::avx512
