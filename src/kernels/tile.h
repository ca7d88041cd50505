// Tile kernels: the dot products of up to kTileRows weight rows with up to kTileTokens
// quantized activation rows in one pass, so each weight block is unpacked once for every
// token and the independent accumulators hide the FMA latency that bounds a single vec-dot.
// Each tile kernel computes, for every (row, token), exactly what the vec-dot kernel of the
// same SIMD level computes (same integer sums, same float operations in the same order):
// MatMul's results do not depend on which path ran. Internal to src/kernels and its tests.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace cohort::kernels {

inline constexpr int kTileRows = 4;
inline constexpr int kTileTokens = 4;

// out[t * out_stride + r] = dot(weight row r, activation row t) for r < n_rows, t < n_tokens,
// 1 <= n_rows <= kTileRows, 1 <= n_tokens <= kTileTokens. Row r starts at w + r * w_stride,
// activation row t (in VecDotType(weight)) at act + t * act_stride; n elements each.
using TileFn = void (*)(const uint8_t* w, int64_t w_stride, int n_rows, const uint8_t* act,
                        int64_t act_stride, int n_tokens, int64_t n, float* out,
                        int64_t out_stride);

// The tile kernel for `weight` at `level`, or nullptr when that level has none (callers then
// loop over GetVecDot). Bit-identical to GetVecDot(weight, level) per (row, token).
TileFn GetTile(DType weight, SimdLevel level);
// The same in llama.cpp's repacked-GEMM order, bit-identical to GetVecDotGrouped (quant.h).
TileFn GetTileGrouped(DType weight, SimdLevel level);

// Per-ISA tables; nullptr where that ISA has no tile for the type. `vnni` / `i8mm` pick the
// instantiation for the AVX-VNNI / NEON i8mm level.
namespace avx2 {
TileFn GetTile(DType weight, bool vnni);          // tile_avx2.cc (legacy), tile_avx2_k.cc (K-quants)
TileFn GetTileGrouped(DType weight, bool vnni);   // types whose grouped order differs (Q4_K)
TileFn GetKTile(DType weight, bool vnni);         // tile_avx2_k.cc
TileFn GetKTileGrouped(DType weight, bool vnni);  // tile_avx2_k.cc
}  // namespace avx2
namespace neon {
TileFn GetTile(DType weight, bool i8mm);          // tile_neon.cc
TileFn GetTileGrouped(DType weight, bool i8mm);
}  // namespace neon

namespace avx512 {
TileFn GetTile(DType weight);  // tile_avx512.cc (legacy types), tile_avx512_k.cc (K-quants)
TileFn GetKTile(DType weight);
TileFn GetKTileGrouped(DType weight);
}  // namespace avx512

}  // namespace cohort::kernels
