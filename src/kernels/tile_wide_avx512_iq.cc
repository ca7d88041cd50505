// The AVX-512 (VNNI) wide tile for IQ4_XS's single tokens (tile_wide.h): 16 rows as the 16
// lanes of a zmm register, in the order of ggml_vec_dot_iq4_xs_q8_K's x86 kernel
// (ref::GetIqX86OrderVecDot): per row 8 integer lanes (lane m: values 4m..4m+3 of every
// sub-block, times the sub-block's scale), one fma per super-block into 8 float lanes, summed
// as hsum_float_8. Here lane m of a row is the m-th of 8 registers: each group of 4 values is
// one dpbusd of the rows' table values + 128 (unsigned) with the token's 4 bytes broadcast,
// seeded with -128 x those bytes' sum (side data), so the sum is the true product, which is
// x86's as Q8_K holds no -128. Batches of >= 8 tokens take the panel GEMM (iq_panel.h).
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int kSeedsPer256 = 64;  // one per group of 4 values

// Side data of a Q8_K activation row: per group of 4 values, -128 x their sum (as int32).
void SideIq4Xs(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act_row);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int g = 0; g < kSeedsPer256; ++g) {
      const int8_t* q = y[i].qs + 4 * g;
      const int32_t seed = -128 * (q[0] + q[1] + q[2] + q[3]);
      std::memcpy(side + i * kSeedsPer256 + g, &seed, sizeof seed);
    }
  }
}

// The 16 rows' super-block i as stored: the head's words gathered, the quants transposed in
// registers (WideRows::Load16x16).
class Iq4XsRows {
 public:
  static constexpr int64_t kBlock = sizeof(BlockIq4Xs);
  COHORT_TARGET_AVX512 Iq4XsRows(const uint8_t* w, int64_t w_stride) : rows_(w, w_stride) {}
  // Lane r: row r's d as a float, its scales_h, its scales_l.
  COHORT_TARGET_AVX512 void Head(int64_t i, __m512* d, __m512i* high, __m512i* low) const {
    const int64_t off = i * kBlock;
    rows_.PrefetchNext(i, kBlock);
    const __m512i head = rows_.Words(off);  // d, then scales_h
    *low = rows_.Words(off + 4);            // scales_l: sub-block ib's 4 bits at 4 ib
    *high = _mm512_srli_epi32(head, 16);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(head));
  }
  // q[c], lane r: bytes 4c..4c+3 of row r's quants of sub-block ib.
  COHORT_TARGET_AVX512 void Quants(int64_t i, int ib, __m512i q[4]) const {
    rows_.Load16x16(i * kBlock + 8 + 16 * ib, q);
  }

 private:
  x86::WideRows rows_;
};

// The same from the rows PackRows packed (pack.h's IQ4_XS layout): per super-block the 16 d,
// the 16 scales_h, the 16 scales_l, then per sub-block the 16 rows' word c at 64c, so every
// load is a whole aligned line and nothing is transposed. A thread's share is one stream,
// read ahead by page and by line (tile_wide_x86.h).
class Iq4XsPacked {
 public:
  static constexpr int64_t kBlock = 16 * static_cast<int64_t>(sizeof(BlockIq4Xs));
  Iq4XsPacked(const uint8_t* w, int64_t group_stride) : group_(w, group_stride) {}
  COHORT_TARGET_AVX512 void Head(int64_t i, __m512* d, __m512i* high, __m512i* low) const {
    const uint8_t* b = group_.Block(i);
    x86::PrefetchPageAhead(b, kBlock);
    *d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
    *high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32)));
    *low = _mm512_loadu_si512(b + 64);
  }
  COHORT_TARGET_AVX512 void Quants(int64_t i, int ib, __m512i q[4]) const {
    const uint8_t* b = group_.Block(i) + 128 + 256 * ib;
    x86::PrefetchLinesAhead(group_.Block(i), kBlock, ib, 8);
    for (int c = 0; c < 4; ++c) q[c] = _mm512_loadu_si512(b + 64 * c);
  }

 private:
  x86::PackedGroup<kBlock> group_;
};

template <typename Rows>
COHORT_TARGET_AVX512 void WideIq4Xs(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t,
                                    const float* side, int64_t, int64_t n, float* out, int64_t) {
  const Rows rows(w, w_stride);
  alignas(16) uint8_t shifted[16];
  for (int j = 0; j < 16; ++j) shifted[j] = static_cast<uint8_t>(kIq4NlValues[j] + 128);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(shifted)));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act);
  const auto* seeds = reinterpret_cast<const int32_t*>(side);
  __m512 acc[8];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m512 dw;
    __m512i high, low;
    rows.Head(i, &dw, &high, &low);
    const int32_t* s = seeds + i * kSeedsPer256;
    const int32_t* y32 = reinterpret_cast<const int32_t*>(y[i].qs);
    // The integer lane sums, kept as floats: a group's dot is at most 4 x 127 x 127 (Q8_K
    // holds no -128, IQ4_NL's values lie in [-127, 113]), times |scale| <= 32, over 8
    // sub-blocks: below 2^24, so every product and partial sum is exact and the lane equals
    // the kernel's int32 one, converted. An fma costs one uop where mullo + add cost three.
    __m512 isum[8];
    for (__m512& v : isum) v = _mm512_setzero_ps();
    for (int ib = 0; ib < 8; ++ib) {
      __m512i q[4];
      rows.Quants(i, ib, q);
      const __m512i ls = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(low, 4 * ib), _mm512_set1_epi32(0xf)),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, 2 * ib), _mm512_set1_epi32(3)), 4));
      const __m512 scale = _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, _mm512_set1_epi32(32)));
      for (int c = 0; c < 4; ++c) {
        // Low nibbles: values 32 ib + 4c.. (lane c); high: 32 ib + 16 + 4c.. (lane 4 + c).
        const __m512i wlo = _mm512_shuffle_epi8(table, _mm512_and_si512(q[c], nibble));
        const __m512i whi = _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q[c], 4), nibble));
        const int glo = 8 * ib + c, ghi = 8 * ib + 4 + c;
        const __m512i dlo = _mm512_dpbusd_epi32(_mm512_set1_epi32(s[glo]), wlo, _mm512_set1_epi32(x86::LoadInt(y32 + glo)));
        const __m512i dhi = _mm512_dpbusd_epi32(_mm512_set1_epi32(s[ghi]), whi, _mm512_set1_epi32(x86::LoadInt(y32 + ghi)));
        isum[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dlo), scale, isum[c]);
        isum[4 + c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dhi), scale, isum[4 + c]);
      }
    }
    const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(y[i].d));
    for (int m = 0; m < 8; ++m) acc[m] = _mm512_fmadd_ps(d, isum[m], acc[m]);
  }
  // X86HorizontalSum8, lane by lane.
  const __m512 s0 = _mm512_add_ps(acc[0], acc[4]), s1 = _mm512_add_ps(acc[1], acc[5]);
  const __m512 s2 = _mm512_add_ps(acc[2], acc[6]), s3 = _mm512_add_ps(acc[3], acc[7]);
  _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(s0, s2), _mm512_add_ps(s1, s3)));
}

template <typename Rows>
void WideIq4XsRun(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, const float* side,
                  int64_t side_stride, int n_tokens, int64_t n, float* out, int64_t out_stride) {
  for (int t = 0; t < n_tokens; ++t) {
    WideIq4Xs<Rows>(w, w_stride, act + t * act_stride, act_stride, side + t * side_stride, side_stride, n,
                    out + t * out_stride, out_stride);
  }
}

}  // namespace

WideTile GetWideTileIq(DType weight, bool grouped) {
  // Grouped tokens (batches of >= 8) take the panel GEMM, whose order this is not.
  if (weight == DType::kIQ4_XS && !grouped) return {WideIq4XsRun<Iq4XsRows>, SideIq4Xs, kSeedsPer256, kWideTokens};
  return {};
}

WideTile GetWideTilePackedIq(DType weight, bool grouped) {
  if (weight == DType::kIQ4_XS && !grouped) return {WideIq4XsRun<Iq4XsPacked>, SideIq4Xs, kSeedsPer256, kWideTokens};
  return {};
}

#else

WideTile GetWideTileIq(DType, bool) { return {}; }
WideTile GetWideTilePackedIq(DType, bool) { return {}; }

#endif

}  // namespace cohort::kernels::avx512
