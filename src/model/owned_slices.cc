// OwnedSlices; see owned_slices.h.
#include "model/owned_slices.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace cohort::model {

OwnedSlices::~OwnedSlices() {
  for (const Region& r : regions_) ::munmap(r.base, r.size);
}

Result<TensorView> OwnedSlices::CopyColumns(const TensorView& w, int64_t begin, int64_t end) {
  COHORT_CHECK(0 <= begin && begin < end && end <= w.ne[0]);
  const int64_t block = Traits(w.type).block_size;
  COHORT_CHECK_EQ(begin % block, 0);
  COHORT_CHECK_EQ(end % block, 0);
  const int64_t front = RowBytes(w.type, begin);
  const int64_t slice = RowBytes(w.type, end - begin);
  const int64_t rows = w.n_rows();
  const size_t size = static_cast<size_t>(front + slice * rows);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return ResourceExhausted(std::string("mmap of a weight slice failed: ") + std::strerror(errno));
  }
  regions_.push_back({base, size});
  bytes_ += slice * rows;
  auto* dst = static_cast<uint8_t*>(base) + front;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(dst + r * slice, w.row(r) + front, slice);
  // The copy faulted in every page of the source rows; hand them back at once (the source is a
  // read-only file mapping, so a later access would simply fault them in again), so the peak
  // resident memory stays the shard plus one tensor, not the model.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(w.data) & ~(page - 1);
  const auto last = reinterpret_cast<uintptr_t>(w.data + rows * w.row_bytes);
  ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
  TensorView v = w;
  v.data = static_cast<const uint8_t*>(base);
  v.row_bytes = slice;
  return v;
}

}  // namespace cohort::model
