// The AVX2 IQ2_XS and IQ2_S x Q8_K vec-dots, bit for bit ref::GetIq2sX86OrderVecDot's and
// ref::GetIq2sX86OrderVecDotGrouped's orders: llama.cpp's ggml_vec_dot_iq2_{xs,s}_q8_K (grid
// bytes times the activations with the signs moved onto them in 8 bits, madd by the scale of
// each 16 values into 8 int lanes, one fma per super-block) and its panel GEMM for batches
// (iqp.cpp: true products, one float step per super-block). llama.cpp's AVX-512 builds take the
// AVX2 vec-dots for these types, so every x86 level runs these.
#include <array>
#include <cmath>
#include <cstring>

#include "kernels/iq2_grids_xs.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// A sub-block's 32 grid magnitudes (unsigned), its 32 sign multipliers (+1 / -1 bytes), and the
// scales 2 * ls + 1 of its first and second 16 values.
struct GridAndSigns {
  __m256i grid;
  __m256i signs;
  std::array<int, 2> scale;
};
inline std::array<int, 2> Scales(const uint8_t* scales, int ib32) {
  return {2 * (scales[ib32] & 0xf) + 1, 2 * (scales[ib32] >> 4) + 1};
}

COHORT_TARGET_AVX2 inline __m256i GridBytes(const uint64_t grid[4]) {
  return _mm256_set_epi64x(static_cast<long long>(grid[3]), static_cast<long long>(grid[2]),
                           static_cast<long long>(grid[1]), static_cast<long long>(grid[0]));
}

// IQ2_XS: each group's 7 stored sign bits index the parity-completed +1/-1 bytes.
COHORT_TARGET_AVX2 inline GridAndSigns LoadIq2Xs(const BlockIq2Xs& b, int ib32) {
  uint64_t grid[4];
  long long signs[4];
  for (int l = 0; l < 4; ++l) {
    const uint16_t q = b.qs[4 * ib32 + l];
    grid[l] = kIq2XsGrid[q & 511];
    signs[l] = static_cast<long long>(kIq2SignBytes.bytes[q >> 9]);
  }
  return {GridBytes(grid), _mm256_set_epi64x(signs[3], signs[2], signs[1], signs[0]), Scales(b.scales, ib32)};
}

// IQ2_S: the 4 stored sign bytes spread to one 0xff/0 mask byte per value, then or-ed with 1.
COHORT_TARGET_AVX2 inline GridAndSigns LoadIq2S(const BlockIq2S& b, int ib32) {
  uint64_t grid[4];
  for (int l = 0; l < 4; ++l) grid[l] = kIq2SGrid[b.qs[4 * ib32 + l] | ((b.qh[ib32] << (8 - 2 * l)) & 0x300)];
  const __m256i mask = x86::BitsToBytes32(b.qs + kQK_K / 8 + 4 * ib32);
  return {GridBytes(grid), _mm256_or_si256(mask, _mm256_set1_epi8(1)), Scales(b.scales, ib32)};
}

template <typename Block, GridAndSigns (*kLoad)(const Block&, int)>
COHORT_TARGET_AVX2 float VecDot(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = kLoad(x[i], ib);
      // sign_epi8 by -1 negates in 8 bits: a -128 under a minus sign stays -128, as x86's.
      const __m256i moved = _mm256_sign_epi8(x86::Load32(y[i].qs + 32 * ib), g.signs);
      const __m256i dot = _mm256_maddubs_epi16(g.grid, moved);  // |pair| <= 2 * 43 * 128: no saturation
      // 16-bit scale lanes 0..7 take the first 16 values, 8..15 the second.
      const __m256i scales16 = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(g.scale[1])),
                                                _mm_set1_epi16(static_cast<int16_t>(g.scale[0])));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(dot, scales16));
    }
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return 0.125f * x86::HorizontalSum(acc);
}

template <typename Block, GridAndSigns (*kLoad)(const Block&, int)>
COHORT_TARGET_AVX2 float VecDotPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = kLoad(x[i], ib);
      const __m256i v = _mm256_sign_epi8(g.grid, g.signs);  // |v| <= 43: no wrap
      const __m256i dot = x86::DotSignedBytes(x86::Load32(y[i].qs + 32 * ib), v);  // lane m: values 4m..4m+3
      const __m256i scales32 = _mm256_set_m128i(_mm_set1_epi32(g.scale[1]), _mm_set1_epi32(g.scale[0]));
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, scales32));
    }
    acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), x86::HalfToFloat(x[i].d) * 0.125f * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIq2sVecDot(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDot<BlockIq2Xs, LoadIq2Xs>;
  return weight == DType::kIQ2_S ? VecDot<BlockIq2S, LoadIq2S> : nullptr;
}
VecDotFn GetIq2sVecDotGrouped(DType weight) {
  if (weight == DType::kIQ2_XS) return VecDotPanel<BlockIq2Xs, LoadIq2Xs>;
  return weight == DType::kIQ2_S ? VecDotPanel<BlockIq2S, LoadIq2S> : nullptr;
}

#else

VecDotFn GetIq2sVecDot(DType) { return nullptr; }
VecDotFn GetIq2sVecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
