// Packed copies of weight rows for the matmul kernels (TensorView::packed): each group of
// TensorView::kPackRows rows with its blocks interleaved, so that the wide tile kernel loads
// a block of all the group's rows with plain vector loads instead of transposing 16 rows in
// registers for every block and every call. llama.cpp repacks its weights at load time for
// the same reason. The copy has the same size as the rows it packs.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace cohort::kernels {

// Whether PackRows can pack n_rows rows of `type` and MatMul would use the packed copy on
// this CPU (Q4_0 and Q4_K with the AVX-512 kernels, whole groups of rows).
bool CanPackRows(DType type, int64_t n_rows, int64_t row_bytes);

// Writes the packed copy of rows src + r * row_bytes, r < n_rows (CanPackRows must hold) to
// dst, which holds n_rows * row_bytes bytes.
void PackRows(DType type, const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst);

}  // namespace cohort::kernels
