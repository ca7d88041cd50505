// Wide tile kernels: kWideRows (16) weight rows at once, one row per 32-bit lane of a 512-bit
// register. The rows' block bytes are transposed in registers (no repacking of the stored
// weights), so the integer dot products of 16 rows come out of dpbusd already one per lane,
// with no horizontal reduction, and one vector FMA advances 16 rows' float accumulators.
// For the types whose float sum is one scalar per (row, token) in llama.cpp's repacked order
// (Q4_0, Q4_K), lane r does exactly the scalar steps of the vec-dot for row r; Q8_0 and Q6_K,
// whose vec-dots keep 8 float lanes per row, keep them in 8 register lanes. Either way the
// results are bit-identical to GetVecDot / GetVecDotGrouped. Internal to src/kernels.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace cohort::kernels {

inline constexpr int kWideRows = 16;
inline constexpr int kWideTokens = 8;
// A packed Q8_0 group (pack.h): its 16 rows' blocks in chunks of kQ8_0ChunkBlocks blocks
// (the last chunk may be shorter), and in each chunk the group's four quads of rows (the rows
// of one pass of its kernel) one after another: the quad's scales, block by block and row by
// row, then its quants the same way, 32 bytes each. A thread's share of a matrix is one
// stream through memory, every quant load is whole 32 bytes (a plain block's start at byte 2
// split one load in two across cache lines), and the activation's chunk stays in L1 while
// the four quads use it.
inline constexpr int kQ8_0QuadRows = 4;
inline constexpr int64_t kQ8_0ChunkBlocks = 32;

struct Q8_0PackedLayout {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  static constexpr int64_t kScaleBytes = sizeof(BlockQ8_0::d);
  static constexpr int64_t kQuantBytes = sizeof(BlockQ8_0::qs);
  int64_t nb;  // blocks per row

  int64_t ChunkLen(int64_t c) const {
    const int64_t left = nb - c * kQ8_0ChunkBlocks;
    return left < kQ8_0ChunkBlocks ? left : kQ8_0ChunkBlocks;
  }
  // Bytes from the group's start to quad g's part of chunk c: its scales, then its quants.
  int64_t Quad(int64_t c, int g) const {
    return c * kQ8_0ChunkBlocks * kWideRows * kBlockBytes + g * ChunkLen(c) * kQ8_0QuadRows * kBlockBytes;
  }
  int64_t QuantsOfQuad(int64_t c, int g) const { return Quad(c, g) + ChunkLen(c) * kQ8_0QuadRows * kScaleBytes; }
  // Where the scale and the quants of block i of the group's row k lie.
  int64_t Scale(int k, int64_t i) const {
    return Quad(i / kQ8_0ChunkBlocks, k / kQ8_0QuadRows) + (kQ8_0QuadRows * (i % kQ8_0ChunkBlocks) + k % kQ8_0QuadRows) * kScaleBytes;
  }
  int64_t Quants(int k, int64_t i) const {
    return QuantsOfQuad(i / kQ8_0ChunkBlocks, k / kQ8_0QuadRows) +
           (kQ8_0QuadRows * (i % kQ8_0ChunkBlocks) + k % kQ8_0QuadRows) * kQuantBytes;
  }
};

// A packed Q6_K group (pack.h): its 16 rows as two stripes of kQ6KStripeRows rows (the rows of
// one single-token pass of its kernel), each stripe block by block, the stripe's rows' block i
// one after another, unchanged: a pass reads its stripe as one stream.
inline constexpr int kQ6KStripeRows = 8;

struct Q6KPackedLayout {
  static constexpr int64_t kBlockBytes = sizeof(BlockQ6_K);
  int64_t nb;  // blocks per row

  // Bytes from the group's start to block i of the group's row k.
  int64_t Block(int k, int64_t i) const {
    return ((k / kQ6KStripeRows) * nb * kQ6KStripeRows + i * kQ6KStripeRows + k % kQ6KStripeRows) * kBlockBytes;
  }
};

// out[t * out_stride + r] = dot(weight row r, activation row t) for r < kWideRows, t <
// n_tokens (1..max_tokens). `side` holds, per token (stride side_stride floats), what the
// kernel's side function computed from that token's activation row (nullptr if none).
using WideTileFn = void (*)(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                            int64_t act_stride, const float* side, int64_t side_stride,
                            int n_tokens, int64_t n, float* out, int64_t out_stride);
// Per activation row: side data the kernel reads per block instead of recomputing it for
// every tile of rows (e.g. the block scales as floats).
using WideSideFn = void (*)(const uint8_t* act_row, int64_t n, float* side);

struct WideTile {
  WideTileFn fn = nullptr;        // nullptr: no wide kernel for this type/level
  WideSideFn side = nullptr;      // nullptr: the kernel needs no side data
  int side_per_256 = 0;           // floats of side data per 256 elements
  int max_tokens = kWideTokens;   // the most tokens one call takes
};

// The wide kernel for `weight` at `level` in GetVecDot's order (grouped = false) or in
// GetVecDotGrouped's (grouped = true).
WideTile GetWideTile(DType weight, SimdLevel level, bool grouped);

// The wide kernel for `weight` reading rows packed by PackRows (pack.h), in GetVecDot's order
// (grouped = false) or GetVecDotGrouped's: it takes the group's packed blocks as w and the
// bytes from one group to the next as w_stride. Empty if none.
WideTile GetWideTilePacked(DType weight, SimdLevel level, bool grouped);

// AVX2 wide tiles (16 rows as two 8-lane halves), in the AVX2 vec-dots' orders; vnni: the
// AVX-VNNI instantiation. tile_wide_avx2.cc (Q4_0, Q8_0; the others it passes to the K file).
namespace avx2 {
WideTile GetWideTile(DType weight, bool grouped, bool vnni);
WideTile GetWideTilePacked(DType weight, bool grouped, bool vnni);
WideTile GetWideTileK(DType weight, bool grouped, bool vnni);        // tile_wide_avx2_k.cc
WideTile GetWideTilePackedK(DType weight, bool grouped, bool vnni);  // tile_wide_avx2_k.cc
}  // namespace avx2
// NEON wide tiles (tile_wide_neon.cc), in the same orders; i8mm: the smmla instantiation.
namespace neon {
WideTile GetWideTile(DType weight, bool grouped, bool i8mm);
WideTile GetWideTilePacked(DType weight, bool grouped, bool i8mm);
}  // namespace neon

namespace avx512 {
WideTile GetWideTile(DType weight, bool grouped);   // tile_wide_avx512.cc
WideTile GetWideTilePacked(DType weight);           // tile_wide_avx512.cc
void PackQ4_0(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst);
WideTile GetWideTilePackedK(DType weight, bool grouped);  // tile_wide_avx512_k.cc
// Packs blocks of block_bytes (a multiple of 16) as 16-byte segments, each the 4 vectors that
// WideRows::Load16x16 would make of it (16 rows' word j in vector j).
void PackSegments16(const uint8_t* src, int64_t row_bytes, int64_t n_rows, int64_t block_bytes, uint8_t* dst);
WideTile GetWideTileK(DType weight, bool grouped);  // tile_wide_avx512_k.cc
WideTile GetWideTileIq(DType weight, bool grouped);        // tile_wide_avx512_iq.cc (IQ4_XS)
WideTile GetWideTilePackedIq(DType weight, bool grouped);  // the same on PackRows' IQ4_XS layout
}  // namespace avx512

}  // namespace cohort::kernels
