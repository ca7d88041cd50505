// Packed copies of weight rows for the matmul kernels (TensorView::packed): each group of
// TensorView::kPackRows rows with its blocks interleaved, block i of all the group's rows
// together, so that a thread's share of a matrix is one stream through memory, which the
// hardware prefetcher follows without help (16 row streams at once need software prefetch,
// and run at 65-75% of the read bandwidth even so). Q4_0 and Q4_K blocks are also split into
// the 32-bit words the wide tile kernel loads as vectors, so it need not transpose 16 rows in
// registers for every block and every call (llama.cpp repacks its weights at load time for
// the same reason); Q8_0 blocks are split into scales and quants, in chunks of 32 blocks and
// quads of rows (its kernel's passes; Q8_0PackedLayout in tile_wide.h); Q6_K blocks stay whole,
// in stripes of 8 rows (its kernel's single-token passes; Q6KPackedLayout); IQ4_XS blocks are
// split into the 16 rows' d, scales and quant words (Q4_K's segments after a head), so its
// single-token tile loads whole lines and transposes nothing. The copy has the
// same size as the rows.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace cohort::kernels {

// Whether PackRows can pack n_rows rows of `type` and MatMul would use the packed copy on
// this CPU (Q4_0, Q4_K, Q6_K and Q8_0 with the AVX-512 or NEON kernels, IQ4_XS with the AVX-512 one,
// whole groups of rows).
bool CanPackRows(DType type, int64_t n_rows, int64_t row_bytes);

// Writes the packed copy of rows src + r * row_bytes, r < n_rows (CanPackRows must hold) to
// dst, which holds n_rows * row_bytes bytes.
void PackRows(DType type, const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst);

// Whether columns [begin, end) of packed rows of `type` are packed + kPackRows * RowBytes(type,
// begin) with the group stride unchanged (Q4_0, Q4_K), as for the stored rows; Q8_0's and
// Q6_K's are not, and a column slice of them reads the stored rows.
bool PackedColumnsSlice(DType type);

// Writes row r of rows that PackRows packed to `packed` back in its stored layout (row_bytes
// bytes to dst): e.g. the embedding row of a token whose tied LM head is packed.
void UnpackRow(DType type, const uint8_t* packed, int64_t row_bytes, int64_t r, uint8_t* dst);

}  // namespace cohort::kernels
