// The AVX2 IQ3_XXS and IQ3_S x Q8_K vec-dots, bit for bit ref::GetIq3X86OrderVecDot's and
// ref::GetIq3X86OrderVecDotGrouped's orders: llama.cpp's ggml_vec_dot_iq3_xxs_q8_K and
// ggml_vec_dot_iq3_s_q8_K (grid bytes times the activations with the signs moved onto them in 8
// bits, 8 int lanes, one fma per super-block) and its panel GEMM for batches (iqp.cpp: true
// products, one float step per super-block).
#include <cmath>
#include <cstring>

#include "kernels/iq3_grids.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "kernels/simd_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

// A sub-block's 32 grid magnitudes (unsigned) and its 32 sign multipliers (+1 / -1 bytes).
struct GridAndSigns {
  __m256i grid;
  __m256i signs;
  int scale;  // 2 * ls + 1
};

COHORT_TARGET_AVX2 inline GridAndSigns LoadSubBlock(const BlockIq3Xxs& b, int ib32) {
  const Iq3XxsSubBlockBits s = Iq3XxsSubBlock(b, ib32);
  const auto grid = [&](int k) { return static_cast<int>(kIq3XxsGrid[s.grid[k]]); };
  const auto signs = [&](int l) { return static_cast<long long>(kIq2SignBytes.bytes[(s.signs >> (7 * l)) & 127]); };
  return {_mm256_setr_epi32(grid(0), grid(1), grid(2), grid(3), grid(4), grid(5), grid(6), grid(7)),
          _mm256_set_epi64x(signs(3), signs(2), signs(1), signs(0)), 2 * static_cast<int>(s.signs >> 28) + 1};
}

COHORT_TARGET_AVX2 inline GridAndSigns LoadSubBlock(const BlockIq3S& b, int ib32) {
  const auto grid = [&](int k) { return static_cast<int>(kIq3SGrid[Iq3SIndex(b, ib32, k)]); };
  const auto signs = [&](int l) { return static_cast<long long>(kIq3SSignBytes.bytes[b.signs[4 * ib32 + l]]); };
  return {_mm256_setr_epi32(grid(0), grid(1), grid(2), grid(3), grid(4), grid(5), grid(6), grid(7)),
          _mm256_set_epi64x(signs(3), signs(2), signs(1), signs(0)), 2 * Iq3SScale(b, ib32) + 1};
}

// d_w * unit * v is the value: IQ3_XXS's unit 1/4, IQ3_S's 1.
template <class Block>
constexpr float kUnit = 0.0f;
template <>
constexpr float kUnit<BlockIq3Xxs> = 0.25f;
template <>
constexpr float kUnit<BlockIq3S> = 1.0f;

template <class Block>
COHORT_TARGET_AVX2 float VecDot(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = LoadSubBlock(x[i], ib);
      // -(-128) wraps to -128 here, as in llama.cpp's kernels (ref::X86Product).
      const __m256i moved = _mm256_sign_epi8(x86::Load32(y[i].qs + 32 * ib), g.signs);
      const __m256i dot = _mm256_maddubs_epi16(g.grid, moved);  // |pair| <= 2 * 62 * 128: no saturation
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(dot, _mm256_set1_epi16(static_cast<int16_t>(g.scale))));
    }
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return kUnit<Block> * x86::HorizontalSum(acc);
}

template <class Block>
COHORT_TARGET_AVX2 float VecDotPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const Block*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = LoadSubBlock(x[i], ib);
      const __m256i v = _mm256_sign_epi8(g.grid, g.signs);  // |v| <= 62: no wrap
      const __m256i dot = x86::DotSignedBytes(x86::Load32(y[i].qs + 32 * ib), v);
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, _mm256_set1_epi32(g.scale)));
    }
    acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), x86::HalfToFloat(x[i].d) * kUnit<Block> * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIq3VecDot(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDot<BlockIq3Xxs>;
  return weight == DType::kIQ3_S ? VecDot<BlockIq3S> : nullptr;
}
VecDotFn GetIq3VecDotGrouped(DType weight) {
  if (weight == DType::kIQ3_XXS) return VecDotPanel<BlockIq3Xxs>;
  return weight == DType::kIQ3_S ? VecDotPanel<BlockIq3S> : nullptr;
}

#else

VecDotFn GetIq3VecDot(DType) { return nullptr; }
VecDotFn GetIq3VecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
