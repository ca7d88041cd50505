// DotGgml and WeightedRowSum (ggml_sums.h): ggml's lane structure and reduction tree written
// out with scalar fused multiply-adds, so the results are the same on every x86 level.
#include "kernels/ggml_sums.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/quant.h"

// The FMA variants are compiled for AVX2 + FMA on x86 (whose baseline has no FMA instruction:
// std::fma is a library call there) and chosen at run time; AArch64 always has FMA.
#if defined(__x86_64__) || defined(__i386__)
#define COHORT_TARGET_FMA __attribute__((target("avx2,fma")))
#else
#define COHORT_TARGET_FMA
#endif

namespace cohort::kernels {
namespace {

// _mm512_reduce_add_ps's order: halves, quarters, then (0+2) + (1+3).
inline float Reduce16(float* a) {
  for (int i = 0; i < 8; ++i) a[i] += a[i + 8];
  for (int i = 0; i < 4; ++i) a[i] += a[i + 4];
  return (a[0] + a[2]) + (a[1] + a[3]);
}

// ggml's GGML_F32_VEC_REDUCE of four 16-lane accumulators: (v0 + v2) + (v1 + v3), then
// Reduce16. Lane l of vector j is a[16 * j + l].
inline float Reduce64(float* a) {
  for (int i = 0; i < 32; ++i) a[i] += a[i + 32];
  for (int i = 0; i < 16; ++i) a[i] += a[i + 16];
  return Reduce16(a);
}

// The bodies are compiled twice, with and without the FMA target, so that std::fma becomes one
// instruction where the CPU has it; both give the same, correctly rounded, results.
__attribute__((always_inline)) inline float DotGgmlBody(const float* a, const float* b, int64_t n) {
  float acc[64] = {};
  const int64_t n_main = n & ~int64_t{63};
  for (int64_t i = 0; i < n_main; i += 64) {
    for (int l = 0; l < 64; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  }
  float sum = Reduce64(acc);
  // GCC vectorises ggml's tail loop: chunks of 16, then one of 8, as rounded products (vmulps)
  // added one by one; the last n % 8 are fused (vfmadd231ss). fma(x, y, 0) is the rounded
  // product, and keeps the compiler from fusing it into the add.
  int64_t i = n_main;
  const int64_t n_rounded = n_main + (n - n_main) / 8 * 8;
  for (; i < n_rounded; ++i) sum += std::fma(a[i], b[i], 0.0f);
  for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
  return sum;
}

template <int kLanes>
__attribute__((always_inline)) inline void WeightedRowSumBody(const float* w, const float* rows,
                                                              int64_t row_stride, int64_t n,
                                                              int64_t width, float* out) {
  constexpr int kCols = 16;  // output columns summed together (acc stays on the stack)
  for (int64_t i0 = 0; i0 < width; i0 += kCols) {
    const int cols = static_cast<int>(std::min<int64_t>(kCols, width - i0));
    // [lane][column]: the inner loop runs along a value row, so it vectorises.
    float acc[kLanes][kCols] = {};
    for (int64_t p = 0; p < n; ++p) {
      const float* row = rows + p * row_stride + i0;
      float* lane = acc[p % kLanes];
      for (int c = 0; c < cols; ++c) lane[c] = std::fma(w[p], row[c], lane[c]);
    }
    for (int c = 0; c < cols; ++c) {
      float lanes[kLanes];
      for (int l = 0; l < kLanes; ++l) lanes[l] = acc[l][c];
      out[i0 + c] = kLanes == 64 ? Reduce64(lanes) : Reduce16(lanes);
    }
  }
}

__attribute__((always_inline)) inline float DotSgemmBody(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  for (int64_t i = 0; i < n; i += 16) {
    for (int l = 0; l < 16; ++l) acc[l] = std::fma(a[i + l], b[i + l], acc[l]);
  }
  return Reduce16(acc);
}

float DotSgemmPlain(const float* a, const float* b, int64_t n) { return DotSgemmBody(a, b, n); }
COHORT_TARGET_FMA float DotSgemmFma(const float* a, const float* b, int64_t n) {
  return DotSgemmBody(a, b, n);
}

float DotGgmlPlain(const float* a, const float* b, int64_t n) { return DotGgmlBody(a, b, n); }
COHORT_TARGET_FMA float DotGgmlFma(const float* a, const float* b, int64_t n) {
  return DotGgmlBody(a, b, n);
}

template <int kLanes>
void WeightedRowSumPlain(const float* w, const float* rows, int64_t stride, int64_t n, int64_t width,
                         float* out) {
  WeightedRowSumBody<kLanes>(w, rows, stride, n, width, out);
}
template <int kLanes>
COHORT_TARGET_FMA void WeightedRowSumFma(const float* w, const float* rows, int64_t stride,
                                                      int64_t n, int64_t width, float* out) {
  WeightedRowSumBody<kLanes>(w, rows, stride, n, width, out);
}

bool HasFma() { return HasFmaUnit(BestSimdLevel()); }

}  // namespace

float DotGgml(const float* a, const float* b, int64_t n) {
  return HasFma() ? DotGgmlFma(a, b, n) : DotGgmlPlain(a, b, n);
}

float DotSgemm(const float* a, const float* b, int64_t n) {
  COHORT_CHECK_EQ(n % 16, 0);
  return HasFma() ? DotSgemmFma(a, b, n) : DotSgemmPlain(a, b, n);
}

void WeightedRowSum(const float* w, const float* rows, int64_t row_stride, int64_t n,
                    int64_t width, SumOrder order, float* out) {
  const bool fma = HasFma();
  if (order == SumOrder::kVecDot) {
    (fma ? WeightedRowSumFma<64> : WeightedRowSumPlain<64>)(w, rows, row_stride, n, width, out);
  } else {
    (fma ? WeightedRowSumFma<16> : WeightedRowSumPlain<16>)(w, rows, row_stride, n, width, out);
  }
}

}  // namespace cohort::kernels
