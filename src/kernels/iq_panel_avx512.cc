// The panel GEMM of the i-quants (iq_panel.h) at the AVX-512 VNNI level: 16 rows as the 16
// lanes of a zmm register. Per sub-block of 16 values and token, four dpbusd of the rows'
// unsigned bytes (value + 128) with the token's 4 signed bytes broadcast, seeded with
// -128 * (the sub-block's activation sum, Q8_K's bsums) so the lane holds the signed dot; times
// the rows' iscales and summed over the super-block, an exact integer as in the reference.
#include <cstring>

#include "kernels/iq_panel.h"
#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx512 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

constexpr int64_t kDfacOffset = kIqPanelDfacOffset;
constexpr int64_t kScalesOffset = kIqPanelScalesOffset;
constexpr int64_t kQuantsOffset = kIqPanelQuantsOffset;

template <int T>
COHORT_TARGET_AVX512 void PanelDot(const uint8_t* panel, const uint8_t* act, int64_t act_stride, int64_t n,
                                   float* out, int64_t out_stride) {
  const int64_t nb = n / 256;
  const BlockQ8_K* y[T];
  for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride);
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* block = panel + i * kIqPanelBlockBytes;
    const uint8_t* quants = block + kQuantsOffset;
    __m512i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
    for (int sb = 0; sb < 16; ++sb) {
      __m512i dot[T];
      for (int t = 0; t < T; ++t) dot[t] = _mm512_set1_epi32(-128 * y[t][i].bsums[sb]);
      for (int k = 0; k < 4; ++k) {
        const __m512i w = _mm512_load_si512(quants + (4 * sb + k) * 64);
        for (int t = 0; t < T; ++t) {
          int32_t word;
          std::memcpy(&word, y[t][i].qs + 16 * sb + 4 * k, sizeof word);
          dot[t] = _mm512_dpbusd_epi32(dot[t], w, _mm512_set1_epi32(word));
        }
      }
      const __m512i scale =
          _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(block + kScalesOffset + 16 * sb)));
      for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], scale));
    }
    const __m512 dfac = _mm512_load_ps(block + kDfacOffset);
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dfac, _mm512_set1_ps(y[t][i].d)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * out_stride, acc[t]);
}

using PanelDotFn = void (*)(const uint8_t*, const uint8_t*, int64_t, int64_t, float*, int64_t);
constexpr PanelDotFn kPanelDots[kIqPanelTokens] = {PanelDot<1>, PanelDot<2>, PanelDot<3>, PanelDot<4>,
                                                   PanelDot<5>, PanelDot<6>, PanelDot<7>, PanelDot<8>};

}  // namespace

COHORT_TARGET_AVX512 void DecodeIqPanel(IqDecodeFn decode, int64_t block_bytes, const uint8_t* w, int64_t w_stride,
                                        int64_t n, uint8_t* panel) {
  alignas(64) int8_t vals[kIqPanelRows][256];
  const x86::WideRows rows(reinterpret_cast<const uint8_t*>(vals), 256);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  IqDecoded dec;
  for (int64_t i = 0; i < n / 256; ++i) {
    uint8_t* block = panel + i * kIqPanelBlockBytes;
    auto* dfac = reinterpret_cast<float*>(block + kDfacOffset);
    auto* scales = reinterpret_cast<int8_t*>(block + kScalesOffset);
    for (int r = 0; r < kIqPanelRows; ++r) {
      decode(w + r * w_stride + i * block_bytes, &dec);
      std::memcpy(vals[r], dec.vals, sizeof dec.vals);
      dfac[r] = dec.dfac;
      for (int sb = 0; sb < 16; ++sb) scales[16 * sb + r] = dec.iscales[sb];
    }
    // Words 4c4 .. 4c4 + 3 of every row into lanes, as unsigned value + 128.
    uint8_t* quants = block + kQuantsOffset;
    for (int c4 = 0; c4 < 16; ++c4) {
      __m512i q[4];
      rows.Load16x16(16 * c4, q);
      for (int c = 0; c < 4; ++c) _mm512_store_si512(quants + (4 * c4 + c) * 64, _mm512_xor_si512(q[c], bias));
    }
  }
}

COHORT_TARGET_AVX512 void DecodeIq4XsPackedPanel(const uint8_t* group, int64_t n, uint8_t* panel) {
  // Packed super-block: 16 d, 16 scales_h, 16 scales_l (128 bytes), then sub-block ib's word c
  // of the 16 rows at 128 + 256 ib + 64 c, whose low nibbles are the values of group 8 ib + c
  // (values 32 ib + 4c..) and high nibbles those of group 8 ib + 4 + c.
  constexpr int64_t kPackedBlock = 16 * static_cast<int64_t>(sizeof(BlockIq4Xs));
  alignas(16) uint8_t shifted[16];
  for (int j = 0; j < 16; ++j) shifted[j] = static_cast<uint8_t>(kIq4NlValues[j] + 128);
  const __m512i table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(shifted)));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = group + i * kPackedBlock;
    uint8_t* block = panel + i * kIqPanelBlockBytes;
    _mm512_store_ps(block + kDfacOffset, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))));
    const __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32)));
    const __m512i low = _mm512_loadu_si512(b + 64);
    for (int ib = 0; ib < 8; ++ib) {
      const __m512i ls = _mm512_or_si512(
          _mm512_and_si512(_mm512_srli_epi32(low, 4 * ib), _mm512_set1_epi32(0xf)),
          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(high, 2 * ib), _mm512_set1_epi32(3)), 4));
      const __m128i scale = _mm512_cvtepi32_epi8(_mm512_sub_epi32(ls, _mm512_set1_epi32(32)));
      // One scale per 32 values: both of the sub-block's 16-value scales.
      _mm_store_si128(reinterpret_cast<__m128i*>(block + kScalesOffset + 16 * (2 * ib)), scale);
      _mm_store_si128(reinterpret_cast<__m128i*>(block + kScalesOffset + 16 * (2 * ib + 1)), scale);
      for (int c = 0; c < 4; ++c) {
        const __m512i q = _mm512_loadu_si512(b + 128 + 256 * ib + 64 * c);
        _mm512_store_si512(block + kQuantsOffset + 64 * (8 * ib + c), _mm512_shuffle_epi8(table, _mm512_and_si512(q, nibble)));
        _mm512_store_si512(block + kQuantsOffset + 64 * (8 * ib + 4 + c),
                           _mm512_shuffle_epi8(table, _mm512_and_si512(_mm512_srli_epi16(q, 4), nibble)));
      }
    }
  }
}

void IqPanelDot(const uint8_t* panel, const uint8_t* act, int64_t act_stride, int n_tokens, int64_t n, float* out,
                int64_t out_stride) {
  kPanelDots[n_tokens - 1](panel, act, act_stride, n, out, out_stride);
}

#else

void DecodeIqPanel(IqDecodeFn, int64_t, const uint8_t*, int64_t, int64_t, uint8_t*) {}
void DecodeIq4XsPackedPanel(const uint8_t*, int64_t, uint8_t*) {}
void IqPanelDot(const uint8_t*, const uint8_t*, int64_t, int, int64_t, float*, int64_t) {}

#endif

}  // namespace cohort::kernels::avx512
