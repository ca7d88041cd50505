// RunOnPool and ColumnSlice; see block_env.h.
#include "model/block_env.h"

#include "core/check.h"
#include "kernels/pack.h"

namespace cohort::model {

void RunOnPool(ThreadPool* pool, const std::function<void(int, int)>& fn) {
  if (pool == nullptr || pool->size() <= 1) {
    fn(0, 1);
    return;
  }
  pool->ParallelRun(fn);
}

TensorView ColumnSlice(const TensorView& w, int64_t begin, int64_t end) {
  COHORT_CHECK(0 <= begin && begin < end && end <= w.ne[0]);
  if (begin == 0 && end == w.ne[0]) return w;
  const int64_t block = Traits(w.type).block_size;
  COHORT_CHECK_EQ(begin % block, 0);
  COHORT_CHECK_EQ(end % block, 0);
  TensorView v = w;
  v.data = w.data + RowBytes(w.type, begin);
  // A packed copy of exactly these columns (OwnedSlices::PackColumnRange: no other slice of
  // such a view is valid, as for CopyColumns), or one whose layout slices as the rows do; else
  // none (the stored rows then serve).
  const bool exact = w.packed_row_bytes == RowBytes(w.type, end - begin);
  v.packed = w.packed != nullptr && (exact || (w.packed_row_bytes == 0 && kernels::PackedColumnsSlice(w.type)))
                 ? w.packed + TensorView::kPackRows * RowBytes(w.type, begin)
                 : nullptr;
  if (v.packed == nullptr) v.packed_row_bytes = 0;
  v.ne[0] = end - begin;  // row_bytes keeps the full row stride
  return v;
}

}  // namespace cohort::model
