// The AVX2 IQ2_XXS x Q8_K vec-dots, bit for bit ref::GetIqGridX86OrderVecDot's and
// ref::GetIqGridX86OrderVecDotGrouped's orders: llama.cpp's ggml_vec_dot_iq2_xxs_q8_K (grid
// bytes times the activations with the signs moved onto them by sign_epi8, 8 int lanes, one
// fma per super-block) and its panel GEMM for batches (iqp.cpp: true products, one float step).
#include <cmath>
#include <cstring>

#include "kernels/iq_grids.h"
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

COHORT_TARGET_AVX2 inline GridAndSigns LoadSubBlock(const BlockIq2Xxs& b, int ib32) {
  const Iq2XxsWords w = Iq2XxsSubBlock(b, ib32);
  const auto grid = [&](int l) { return static_cast<long long>(kIq2XxsGrid[(w.grid >> (8 * l)) & 0xff]); };
  const auto signs = [&](int l) { return static_cast<long long>(kIq2SignBytes.bytes[(w.signs >> (7 * l)) & 127]); };
  return {_mm256_set_epi64x(grid(3), grid(2), grid(1), grid(0)),
          _mm256_set_epi64x(signs(3), signs(2), signs(1), signs(0)), 2 * static_cast<int>(w.signs >> 28) + 1};
}

COHORT_TARGET_AVX2 float VecDotIq2Xxs(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = LoadSubBlock(x[i], ib);
      const __m256i moved = _mm256_sign_epi8(x86::Load32(y[i].qs + 32 * ib), g.signs);
      const __m256i dot = _mm256_maddubs_epi16(g.grid, moved);
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(dot, _mm256_set1_epi16(static_cast<int16_t>(g.scale))));
    }
    const __m256 d = _mm256_set1_ps(x86::HalfToFloat(x[i].d) * y[i].d);
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum), acc);
  }
  return 0.125f * x86::HorizontalSum(acc);
}

COHORT_TARGET_AVX2 float VecDotIq2XxsPanel(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockIq2Xxs*>(w);
  const auto* y = static_cast<const BlockQ8_K*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    __m256i sum = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const GridAndSigns g = LoadSubBlock(x[i], ib);
      const __m256i v = _mm256_sign_epi8(g.grid, g.signs);  // |v| <= 43: no wrap
      const __m256i dot = x86::DotSignedBytes(x86::Load32(y[i].qs + 32 * ib), v);
      sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(dot, _mm256_set1_epi32(g.scale)));
    }
    acc = std::fma(static_cast<float>(x86::HorizontalSum(sum)), x86::HalfToFloat(x[i].d) * 0.125f * y[i].d, acc);
  }
  return acc;
}

}  // namespace

VecDotFn GetIqGridVecDot(DType weight) {
  if (VecDotFn fn = GetIq1VecDot(weight)) return fn;
  return weight == DType::kIQ2_XXS ? VecDotIq2Xxs : GetIq2sVecDot(weight);
}
VecDotFn GetIqGridVecDotGrouped(DType weight) {
  if (VecDotFn fn = GetIq1VecDotGrouped(weight)) return fn;
  return weight == DType::kIQ2_XXS ? VecDotIq2XxsPanel : GetIq2sVecDotGrouped(weight);
}

#else

VecDotFn GetIqGridVecDot(DType) { return nullptr; }
VecDotFn GetIqGridVecDotGrouped(DType) { return nullptr; }

#endif

}  // namespace cohort::kernels::avx2
