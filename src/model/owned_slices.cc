// OwnedSlices; see owned_slices.h.
#include "model/owned_slices.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/pack.h"

namespace cohort::model {

OwnedSlices::~OwnedSlices() {
  for (const Region& r : regions_) ::munmap(r.base, r.size);
}

Result<uint8_t*> OwnedSlices::Allocate(size_t front, size_t bytes, bool huge) {
  constexpr size_t kHugePage = size_t{2} << 20;
  // `huge`: over-allocated by a huge page so that the bytes start on a huge-page boundary.
  const size_t size = front + bytes + (huge ? kHugePage : 0);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return ResourceExhausted(std::string("mmap of a weight slice failed: ") + std::strerror(errno));
  }
  regions_.push_back({base, size});
  bytes_ += static_cast<int64_t>(bytes);
  uint8_t* start = static_cast<uint8_t*>(base) + front;
  if (huge) {
    start += (kHugePage - reinterpret_cast<uintptr_t>(start) % kHugePage) % kHugePage;
    ::madvise(start, bytes, MADV_HUGEPAGE);  // advice only, as in ReserveArena
  }
  return start;
}

Status OwnedSlices::ReserveArena(int64_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t size = static_cast<size_t>(bytes);
  // Over-allocated by a huge page so that the region can start on a huge-page boundary; the
  // untouched slack costs no memory.
  void* base = ::mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return ResourceExhausted(std::string("mmap of the weights' region failed: ") + std::strerror(errno));
  }
  regions_.push_back({base, size + kHugePage});
  const uintptr_t start = (reinterpret_cast<uintptr_t>(base) + kHugePage - 1) & ~(kHugePage - 1);
  // Advice only: without transparent huge pages the region is ordinary memory.
  ::madvise(reinterpret_cast<void*>(start), size, MADV_HUGEPAGE);
  // The first write to fresh memory is most of a copy's cost (the kernel zeroes the page; in
  // a VM the host may have to back it first: 0.5-8 GB/s on one core here, 14-15 on two), so
  // every core faults in its share of the pages before the copies fill them.
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size + page - 1) / page;
  std::vector<std::thread> touch;
  for (unsigned t = 0; t < threads; ++t) {
    touch.emplace_back([=] {
      auto* base_page = reinterpret_cast<volatile uint8_t*>(start);
      for (size_t p = pages * t / threads; p < pages * (t + 1) / threads; ++p) base_page[p * page] = 0;
    });
  }
  for (std::thread& th : touch) th.join();
  arena_ = reinterpret_cast<uint8_t*>(start);
  arena_left_ = size;
  return Status::Ok();
}

Result<uint8_t*> OwnedSlices::AllocateWhole(size_t bytes) {
  const size_t padded = (bytes + 63) & ~size_t{63};
  if (padded > arena_left_) return Allocate(0, bytes);
  uint8_t* p = arena_;
  arena_ += padded;
  arena_left_ -= padded;
  bytes_ += static_cast<int64_t>(bytes);
  return p;
}

namespace {

// Source bytes copied between releases: the transient resident memory of a copy.
constexpr int64_t kReleaseChunkBytes = 4 << 20;

// Releases the mapped pages of [begin, end) (rounded out to pages). The copy faulted them in;
// the source is a read-only file mapping, so a later access would simply fault them in again.
void ReleaseRange(const uint8_t* begin, const uint8_t* end) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(begin) & ~(page - 1);
  const auto last = reinterpret_cast<uintptr_t>(end);
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace

void OwnedSlices::Release(const TensorView& w) {
  ReleaseRange(w.data, w.data + w.n_rows() * w.row_bytes);
}

template <typename CopyFn>
void OwnedSlices::CopyReleasing(const TensorView& w, int64_t rows_per_step, CopyFn copy) {
  // Whole steps of rows at a time, releasing the source as we go (as CopyRows does).
  const int64_t steps_per_chunk = std::max<int64_t>(1, kReleaseChunkBytes / (rows_per_step * w.row_bytes));
  for (int64_t r = 0; r < w.n_rows(); r += rows_per_step * steps_per_chunk) {
    const int64_t rows = std::min(rows_per_step * steps_per_chunk, w.n_rows() - r);
    copy(r, rows);
    ReleaseRange(w.row(r), w.row(r) + rows * w.row_bytes);
  }
  copied_sources_.push_back(w);
}

Result<bool> OwnedSlices::Pack(TensorView& w) {
  if (w.packed != nullptr || !kernels::CanPackRows(w.type, w.n_rows(), w.row_bytes) ||
      RowBytes(w.type, w.ne[0]) != w.row_bytes) {
    return false;
  }
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, AllocateWhole(static_cast<size_t>(w.n_rows() * w.row_bytes)));
  CopyReleasing(w, TensorView::kPackRows, [&](int64_t r, int64_t rows) {
    kernels::PackRows(w.type, w.row(r), w.row_bytes, rows, dst + r * w.row_bytes);
  });
  w.packed = dst;
  return true;
}

Status OwnedSlices::Own(TensorView& w) {
  COHORT_CHECK(w.packed == nullptr);
  COHORT_CHECK_EQ(RowBytes(w.type, w.ne[0]), w.row_bytes);
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, AllocateWhole(static_cast<size_t>(w.n_rows() * w.row_bytes)));
  CopyReleasing(w, 1, [&](int64_t r, int64_t rows) {
    std::memcpy(dst + r * w.row_bytes, w.row(r), static_cast<size_t>(rows * w.row_bytes));
  });
  w.data = dst;
  return Status::Ok();
}

void OwnedSlices::ReleaseCopiedSources() {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (const TensorView& w : copied_sources_) {
    // A fault maps the pages around it (whole large folios) up to the ends of its mapping's
    // region: set apart by a flag of their own, the sources' pages stay out of the faults of
    // the tensors between them that are read in place.
    const auto first = (reinterpret_cast<uintptr_t>(w.data) + page - 1) & ~(page - 1);
    const auto last = reinterpret_cast<uintptr_t>(w.data + w.n_rows() * w.row_bytes) & ~(page - 1);
    if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_RANDOM);
    Release(w);
  }
}

Result<bool> OwnedSlices::PackRowRange(TensorView& w, int64_t begin, int64_t end) {
  const int64_t n = end - begin;
  if (w.packed != nullptr || begin % TensorView::kPackRows != 0 || RowBytes(w.type, w.ne[0]) != w.row_bytes ||
      !kernels::CanPackRows(w.type, n, w.row_bytes)) {
    return false;
  }
  const TensorView rows = w.Rows(begin, end);
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, Allocate(static_cast<size_t>(begin * w.row_bytes),
                                                 static_cast<size_t>(n * w.row_bytes), /*huge=*/true));
  CopyReleasing(rows, TensorView::kPackRows, [&](int64_t r, int64_t k) {
    kernels::PackRows(w.type, rows.row(r), w.row_bytes, k, dst + r * w.row_bytes);
  });
  w.packed = dst - begin * w.row_bytes;  // the start of the (untouched, unbacked) front
  return true;
}

Result<bool> OwnedSlices::PackColumnRange(TensorView& w, int64_t begin, int64_t end) {
  COHORT_CHECK(0 <= begin && begin < end && end <= w.ne[0]);
  COHORT_CHECK_EQ(begin % Traits(w.type).block_size, 0);
  COHORT_CHECK_EQ(end % Traits(w.type).block_size, 0);
  const int64_t slice = RowBytes(w.type, end - begin);
  const int64_t offset = RowBytes(w.type, begin);
  const int64_t n = w.n_rows();
  constexpr int64_t kGroup = TensorView::kPackRows;
  if (w.packed != nullptr || RowBytes(w.type, w.ne[0]) != w.row_bytes || !kernels::CanPackRows(w.type, n, slice)) {
    return false;
  }
  // ColumnSlice(w, begin, end) finds the copy at packed + kGroup * offset.
  const size_t front = static_cast<size_t>(kGroup * offset);
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, Allocate(front, static_cast<size_t>(n * slice), /*huge=*/true));
  std::vector<uint8_t> group(static_cast<size_t>(kGroup * slice));  // one group's columns, compact
  int64_t released = 0;  // rows whose mapped pages are released
  for (int64_t g = 0; g < n; g += kGroup) {
    for (int64_t k = 0; k < kGroup; ++k) std::memcpy(group.data() + k * slice, w.row(g + k) + offset, slice);
    kernels::PackRows(w.type, group.data(), slice, kGroup, dst + g * slice);
    if ((g + kGroup - released) * w.row_bytes >= kReleaseChunkBytes || g + kGroup == n) {
      ReleaseRange(w.data + released * w.row_bytes, w.data + (g + kGroup) * w.row_bytes);
      released = g + kGroup;
    }
  }
  w.packed = dst - front;
  w.packed_row_bytes = slice;
  return true;
}

Status OwnedSlices::ShareRows(TensorView* w, int64_t begin, int64_t end) {
  if (w->empty() || begin >= end) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(const bool packed, PackRowRange(*w, begin, end));
  if (packed || (begin == 0 && end == w->n_rows())) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(*w, CopyRows(*w, begin, end));
  return Status::Ok();
}

Status OwnedSlices::ShareColumns(TensorView* w, int64_t begin, int64_t end) {
  if (w->empty() || begin >= end) return Status::Ok();
  if (begin == 0 && end == w->ne[0]) return ShareRows(w, 0, w->n_rows());
  COHORT_ASSIGN_OR_RETURN(const bool packed, PackColumnRange(*w, begin, end));
  if (packed) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(*w, CopyColumns(*w, begin, end));
  return Status::Ok();
}

Status OwnedSlices::ShareStridedRows(TensorView* w, int64_t stride, int64_t begin, int64_t end) {
  if (w->empty() || begin >= end) return Status::Ok();
  COHORT_CHECK(stride > 0 && w->n_rows() % stride == 0 && 0 <= begin && end <= stride);
  if (begin == 0 && end == stride) return ShareRows(w, 0, w->n_rows());
  const int64_t n = end - begin;
  const int64_t groups = w->n_rows() / stride;
  const int64_t row_bytes = w->row_bytes;
  const bool pack = w->packed == nullptr && begin % TensorView::kPackRows == 0 &&
                    stride % TensorView::kPackRows == 0 && RowBytes(w->type, w->ne[0]) == row_bytes &&
                    kernels::CanPackRows(w->type, n, row_bytes);
  // One mapping spans the first kept row to the last, each group's rows at their offset in w,
  // so the views index as w does; the gaps between groups are never written and cost no memory
  // (but for the pages a group's ends share with them). No huge pages: one would back the
  // gaps too, and an expert's share is often smaller than 2 MiB.
  const int64_t first = begin;
  const int64_t last = (groups - 1) * stride + end;  // one past the last kept row
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, Allocate(static_cast<size_t>(first * row_bytes),
                                                 static_cast<size_t>((last - first) * row_bytes)));
  bytes_ -= (last - first - groups * n) * row_bytes;  // count the copies only, not the gaps
  uint8_t* const base = dst - first * row_bytes;      // where row 0 would be
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t r0 = g * stride + begin;
    const TensorView rows = w->Rows(r0, r0 + n);
    uint8_t* to = base + r0 * row_bytes;
    if (pack) {
      CopyReleasing(rows, TensorView::kPackRows, [&](int64_t r, int64_t k) {
        kernels::PackRows(w->type, rows.row(r), row_bytes, k, to + r * row_bytes);
      });
    } else {
      CopyReleasing(rows, 1, [&](int64_t r, int64_t k) {
        std::memcpy(to + r * row_bytes, rows.row(r), static_cast<size_t>(k * row_bytes));
      });
    }
  }
  if (pack) {
    w->packed = base;  // w->data stays the mapping, as after PackRowRange
  } else {
    w->data = base;
    w->packed = nullptr;
  }
  return Status::Ok();
}

Result<TensorView> OwnedSlices::CopyRows(const TensorView& w, int64_t begin, int64_t end) {
  COHORT_CHECK(0 <= begin && begin < end && end <= w.n_rows());
  const size_t front = static_cast<size_t>(begin * w.row_bytes);
  const size_t bytes = static_cast<size_t>((end - begin) * w.row_bytes);
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, Allocate(front, bytes));
  // In chunks, releasing the source as we go: the peak stays the copy plus one chunk.
  for (size_t done = 0; done < bytes; done += kReleaseChunkBytes) {
    const size_t n = std::min<size_t>(kReleaseChunkBytes, bytes - done);
    std::memcpy(dst + done, w.data + front + done, n);
    ReleaseRange(w.data + front + done, w.data + front + done + n);
  }
  TensorView v = w;
  v.data = dst - front;  // the start of the (untouched, unbacked) front of the same mapping
  v.packed = nullptr;
  return v;
}

Result<TensorView> OwnedSlices::CopyColumns(const TensorView& w, int64_t begin, int64_t end) {
  COHORT_CHECK(0 <= begin && begin < end && end <= w.ne[0]);
  const int64_t block = Traits(w.type).block_size;
  COHORT_CHECK_EQ(begin % block, 0);
  COHORT_CHECK_EQ(end % block, 0);
  const int64_t front = RowBytes(w.type, begin);
  const int64_t slice = RowBytes(w.type, end - begin);
  const int64_t rows = w.n_rows();
  COHORT_ASSIGN_OR_RETURN(uint8_t* dst, Allocate(static_cast<size_t>(front), static_cast<size_t>(slice * rows)));
  int64_t released = 0;  // rows whose source pages are released
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * slice, w.row(r) + front, slice);
    if ((r + 1 - released) * w.row_bytes >= kReleaseChunkBytes || r + 1 == rows) {
      ReleaseRange(w.data + released * w.row_bytes, w.data + (r + 1) * w.row_bytes);
      released = r + 1;
    }
  }
  TensorView v = w;
  v.data = dst - front;
  v.packed = nullptr;
  v.row_bytes = slice;
  return v;
}

}  // namespace cohort::model
