// AVX-512 (VNNI) wide tile kernels (tile_wide.h) for Q4_0 and Q8_0 against Q8_0 activations.
// Q4_0, 16 rows as the 16 lanes of a zmm register, reproduces VecDotQ4_0 (vec_dot_avx512.cc)
// per lane: per block the exact integer sum of (q - 8) * y, then acc = fma(sum, d_w * d_a, acc).
#include <cstring>

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

// Side data of a Q8_0 activation row for Q8_0 weights: per block its scale as a float, then
// the 8 int32 lanes -128 * (sum of bytes 4m..4m+3), m = 0..7: the seed that turns dpbusd's
// unsigned q + 128 back into the signed product (see WideQ8_0Half), made once per row rather
// than by a dpbusd per (token, block) in the kernel's busiest units.
constexpr int kQ8_0SeedWords = 9;

void SideQ8_0Seeds(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  for (int64_t i = 0; i < n / kQK; ++i) {
    float* out = side + i * kQ8_0SeedWords;
    out[0] = HalfToFloat(y[i].d);
    for (int m = 0; m < 8; ++m) {
      const int32_t seed = -128 * (y[i].qs[4 * m] + y[i].qs[4 * m + 1] + y[i].qs[4 * m + 2] + y[i].qs[4 * m + 3]);
      std::memcpy(out + 1 + m, &seed, sizeof seed);
    }
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
      // The integer sum is exact in any order. With many tokens one chain per token saves
      // the second chain's zeroing and the final add; alone, a token needs more chains to
      // hide dpbusd's latency.
      __m512i sum;
      if constexpr (T >= 8) {
        sum = _mm512_set1_epi32(s.neg8_sum);
        for (int c = 0; c < 4; ++c) {
          sum = _mm512_dpbusd_epi32(sum, lo[c], _mm512_set1_epi32(x86::LoadInt(y32 + c)));
          sum = _mm512_dpbusd_epi32(sum, hi[c], _mm512_set1_epi32(x86::LoadInt(y32 + 4 + c)));
        }
      } else {
        __m512i sum_lo = _mm512_set1_epi32(s.neg8_sum);
        __m512i sum_hi = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          sum_lo = _mm512_dpbusd_epi32(sum_lo, lo[c], _mm512_set1_epi32(x86::LoadInt(y32 + c)));
          sum_hi = _mm512_dpbusd_epi32(sum_hi, hi[c], _mm512_set1_epi32(x86::LoadInt(y32 + 4 + c)));
        }
        sum = _mm512_add_epi32(sum_lo, sum_hi);
      }
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(s.d));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), d, acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

// Q8_0 keeps 8 float lanes per (row, token) (vec_dot_avx512.cc's DotQ8_0Blocks): two rows
// per zmm register, row 2p in lanes 0..7 and row 2p + 1 in lanes 8..15, each lane doing
// exactly the vec-dot's steps. The signed weights go into dpbusd as q + 128 (unsigned), and
// -128 * (the activation's sums of 4, from SideQ8_0Seeds) seeds each sum, so every int32
// lane is the vec-dot's.
// Rows [8h, 8h + 8) of the 16; `step` is the prefetch step (see WideRows::PrefetchNext).
template <int T>
COHORT_TARGET_AVX512 void WideQ8_0Half(const uint8_t* w, int64_t w_stride, int h, const uint8_t* act,
                                       int64_t act_stride, const float* side, int64_t side_stride,
                                       int64_t n, float* out, int64_t out_stride) {
  constexpr int kPairs = 4;
  const int64_t nb = n / kQK;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const uint8_t* rows = w + 8 * h * w_stride;
  const uint8_t* next = w + 16 * w_stride + h * nb * 8 * static_cast<int64_t>(sizeof(BlockQ8_0));
  __m512i pair_index[kPairs];  // float lanes 0..7 take row 2p's scale, 8..15 row 2p + 1's
  for (int p = 0; p < kPairs; ++p) {
    pair_index[p] = _mm512_mask_set1_epi32(_mm512_set1_epi32(2 * p), 0xff00, 2 * p + 1);
  }
  __m512 acc[kPairs][T];
  for (int p = 0; p < kPairs; ++p) {
    for (int t = 0; t < T; ++t) acc[p][t] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ8_0));
    for (int64_t b = 0; b < 8 * static_cast<int64_t>(sizeof(BlockQ8_0)); b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + 8 * off + b), _MM_HINT_T1);
    }
    uint64_t half_words[2] = {0, 0};
    for (int r = 0; r < 8; ++r) {
      uint16_t d;
      std::memcpy(&d, rows + r * w_stride + off, 2);
      half_words[r / 4] |= static_cast<uint64_t>(d) << (16 * (r % 4));
    }
    const __m256 dw = _mm256_cvtph_ps(
        _mm_set_epi64x(static_cast<long long>(half_words[1]), static_cast<long long>(half_words[0])));
    __m512i q[kPairs];
    for (int p = 0; p < kPairs; ++p) {
      const uint8_t* a = rows + 2 * p * w_stride + off + 2;
      const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
      const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + w_stride));
      q[p] = _mm512_xor_si512(_mm512_mask_broadcast_i64x4(_mm512_maskz_broadcast_i64x4(0x0f, qa), 0xf0, qb), flip);
    }
    for (int t = 0; t < T; ++t) {
      const uint8_t* y = act + t * act_stride + off + 2;
      const float* s = side + t * side_stride + kQ8_0SeedWords * i;
      const __m512i yb = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y)));
      const __m512i seed = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 1)));
      // d_w * d_a for the 8 rows in one 8-lane multiply, then spread to each pair's lanes: the
      // multiply and FMA units, which bound this loop, are spared a multiply per pair.
      const __m512 d = _mm512_zextps256_ps512(_mm256_mul_ps(dw, _mm256_set1_ps(s[0])));
      for (int p = 0; p < kPairs; ++p) {
        const __m512i sum = _mm512_dpbusd_epi32(seed, q[p], yb);
        acc[p][t] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pair_index[p], d), _mm512_cvtepi32_ps(sum), acc[p][t]);
      }
    }
  }
  for (int p = 0; p < kPairs; ++p) {
    for (int t = 0; t < T; ++t) {
      float lanes[16];
      _mm512_storeu_ps(lanes, acc[p][t]);
      float* o = out + t * out_stride + 8 * h + 2 * p;
      o[0] = x86::HorizontalSum(_mm256_loadu_ps(lanes));
      o[1] = x86::HorizontalSum(_mm256_loadu_ps(lanes + 8));
    }
  }
}

template <int T>
struct Q8_0Kernel {
  static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                  const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
    for (int h = 0; h < 2; ++h) WideQ8_0Half<T>(w, w_stride, h, act, act_stride, side, side_stride, n, out, out_stride);
  }
};

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
    // 4 tokens keep the 4 x 4 accumulators of an 8-row half in registers.
    case DType::kQ8_0: return {x86::WideRun<Q8_0Kernel, 4>, SideQ8_0Seeds, kQ8_0SeedWords * 8, 4};
    default: return GetWideTileK(weight, grouped);
  }
}

#else

WideTile GetWideTile(DType, bool) { return {}; }

#endif

}  // namespace cohort::kernels::avx512
