// Non-owning views of tensor data. Shapes follow ggml order: ne[0] is the contiguous
// dimension, so a weight matrix of ne {n_in, n_out} has n_out rows of n_in elements.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/dtype.h"

namespace cohort {

struct TensorView {
  DType type = DType::kF32;
  const uint8_t* data = nullptr;     // borrowed; often points into an mmapped GGUF
  std::array<int64_t, 4> ne = {1, 1, 1, 1};
  int64_t row_bytes = 0;             // bytes between consecutive rows (ne[0] elements)
  // Optionally the same rows again, packed for the matmul kernels: groups of kPackRows rows,
  // each group's blocks one after another, each block holding the group's kPackRows blocks
  // interleaved (kernels/pack.h). Group g starts at packed + g * kPackRows * PackedRowBytes(),
  // so rows and column slices offset it as they do data. Null when not packed (the kernels
  // then read data).
  const uint8_t* packed = nullptr;
  // The packed copy's row stride when it differs from row_bytes (0: row_bytes): a rank's
  // packed column slice holds only its columns, while data keeps the mapped rows' stride.
  int64_t packed_row_bytes = 0;

  int64_t PackedRowBytes() const { return packed_row_bytes != 0 ? packed_row_bytes : row_bytes; }

  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  int64_t n_elements() const { return ne[0] * n_rows(); }
  const uint8_t* row(int64_t r) const {
    COHORT_CHECK_GE(r, 0);
    COHORT_CHECK_LT(r, n_rows());
    return data + r * row_bytes;
  }
  bool empty() const { return data == nullptr; }

  static constexpr int64_t kPackRows = 16;

  // A view of rows [begin, end) (of the flattened rows), e.g. one expert of a 3-D tensor.
  TensorView Rows(int64_t begin, int64_t end) const {
    COHORT_CHECK(0 <= begin && begin <= end && end <= n_rows());
    TensorView v = *this;
    v.data = data + begin * row_bytes;
    v.packed = packed != nullptr && begin % kPackRows == 0 ? packed + begin * PackedRowBytes() : nullptr;
    v.ne = {ne[0], end - begin, 1, 1};
    return v;
  }

  static TensorView Make(DType type, const void* data, std::array<int64_t, 4> ne) {
    TensorView v;
    v.type = type;
    v.data = static_cast<const uint8_t*>(data);
    v.ne = ne;
    v.row_bytes = RowBytes(type, ne[0]);
    return v;
  }
};

}  // namespace cohort
