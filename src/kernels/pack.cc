// PackRows; see pack.h. The layout is the packed kernel's (tile_wide_avx512.cc).
#include "kernels/pack.h"

#include "core/check.h"
#include "core/tensor.h"
#include "kernels/quant.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels {

bool CanPackRows(DType type, int64_t n_rows, int64_t row_bytes) {
  return (type == DType::kQ4_0 || type == DType::kQ4_K) && n_rows > 0 && n_rows % TensorView::kPackRows == 0 &&
         row_bytes * TensorView::kPackRows < (int64_t{1} << 31) &&
         GetWideTilePacked(type, BestSimdLevel(), false).fn != nullptr;
}

void PackRows(DType type, const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  COHORT_CHECK(CanPackRows(type, n_rows, row_bytes));
  if (type == DType::kQ4_K) {
    avx512::PackSegments16(src, row_bytes, n_rows, Traits(type).type_size, dst);
  } else {
    avx512::PackQ4_0(src, row_bytes, n_rows, dst);
  }
}

}  // namespace cohort::kernels
