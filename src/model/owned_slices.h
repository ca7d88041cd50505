// Column slices of weight matrices copied out of the mapped GGUF into memory of their own, so
// a tensor-parallel rank that uses a slice of every row (attn_output, ffn_down) keeps only that
// slice resident instead of every page the rows share with the other ranks' slices.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace cohort::model {

class OwnedSlices {
 public:
  OwnedSlices() = default;
  ~OwnedSlices();
  OwnedSlices(const OwnedSlices&) = delete;
  OwnedSlices& operator=(const OwnedSlices&) = delete;

  // Copies columns [begin, end) of every row of w (quant-block aligned) and returns a view
  // that ColumnSlice(view, begin, end) turns into exactly the copy; no other slice of the
  // returned view is valid. The copy sits `begin`'s row offset into an anonymous mapping
  // whose untouched front costs no memory. w must be a view into a read-only file mapping (or
  // memory that can be dropped and re-read): its pages are released after the copy.
  Result<TensorView> CopyColumns(const TensorView& w, int64_t begin, int64_t end);
  // Copies rows [begin, end) (of the flattened rows) likewise: w.Rows(b, e) and w.row(r) of the
  // returned view are valid for begin <= b <= e <= end only.
  Result<TensorView> CopyRows(const TensorView& w, int64_t begin, int64_t end);
  // A rank's rows [begin, end) of w: packed into memory of their own (PackRowRange) where the
  // kernels read w's type packed, else copied (CopyRows) unless they are all of w (then w
  // stays mapped as it is). On return *w serves rows [begin, end).
  Status ShareRows(TensorView* w, int64_t begin, int64_t end);
  // The same for columns [begin, end) of every row: PackColumnRange, else CopyColumns.
  Status ShareColumns(TensorView* w, int64_t begin, int64_t end);
  // The same for rows [g * stride + begin, g * stride + end) of every group g of `stride` rows
  // (0 <= begin <= end <= stride, stride divides the rows): a column share of every expert of
  // a 3-D expert tensor. Packed (one PackRows per group) where the kernels read w's type packed
  // and the groups' rows start on pack-group boundaries, else copied; either way on return
  // w->Rows(g * stride + b, g * stride + e) serves begin <= b <= e <= end, indexed as in w.
  Status ShareStridedRows(TensorView* w, int64_t stride, int64_t begin, int64_t end);
  // Packs rows [begin, end) of w, whole groups from a group boundary, out of a read-only file
  // mapping into memory of their own (huge pages where the kernel gives them), releasing the
  // mapped pages as it goes: w.packed serves those rows (indexed as in w), w.data stays the
  // mapping (readers of plain rows fault its pages in again). Returns whether it packed (the
  // kernels read w's type packed, the range and the rows suit).
  Result<bool> PackRowRange(TensorView& w, int64_t begin, int64_t end);
  // Packs columns [begin, end) (quant-block aligned) of every row likewise, as a matrix of
  // their own (TensorView::packed_row_bytes), which ColumnSlice(w, begin, end) reads.
  Result<bool> PackColumnRange(TensorView& w, int64_t begin, int64_t end);
  // Sets aside one region of `bytes` for the Pack and Own copies that follow, backed by huge
  // pages where the kernel allows them (transparent huge pages on request): one TLB entry
  // per 2 MiB instead of 512 lets a stream of weights reach more of the memory bandwidth
  // (generation on the 1B Q4_0 model +3-5% on this machine's VM). Copies beyond it get
  // mappings of their own.
  Status ReserveArena(int64_t bytes);
  // Gives w a packed copy (TensorView::packed, kernels/pack.h) when the kernels read its type
  // packed, releasing w's mapped pages (w must be a read-only file mapping, as above); w.data
  // stays valid for the readers of plain rows (they fault the pages in again). Returns whether
  // it packed.
  Result<bool> Pack(TensorView& w);
  // Moves w's rows (contiguous, as a file's tensor is) into a copy of their own and points w
  // at it, releasing the mapped pages as Pack does.
  Status Own(TensorView& w);
  // Releases the sources of every Pack and Own again (reading a tensor maps its neighbours'
  // pages too: the kernel maps the pages around a fault) and marks them so that later faults
  // on the tensors read in place leave them unmapped.
  void ReleaseCopiedSources();
  int64_t bytes() const { return bytes_; }

 private:
  // An anonymous mapping of front + bytes; returns the start of the `bytes` part, which
  // `huge` asks to be backed by transparent huge pages.
  Result<uint8_t*> Allocate(size_t front, size_t bytes, bool huge = false);
  // `bytes` from the arena (cache-line aligned) if it has them left, else from Allocate.
  Result<uint8_t*> AllocateWhole(size_t bytes);
  // Copies rows [0, n_rows) of w to dst with `copy`, `rows_per_step` rows at a time,
  // releasing the source as it goes, and records w for ReleaseCopiedSources.
  template <typename CopyFn>
  void CopyReleasing(const TensorView& w, int64_t rows_per_step, CopyFn copy);
  // Releases the mapped pages of w's rows (a read-only file mapping refaults them on use).
  static void Release(const TensorView& w);

  struct Region {
    void* base;
    size_t size;
  };
  std::vector<Region> regions_;
  uint8_t* arena_ = nullptr;  // the unused part of ReserveArena's region
  size_t arena_left_ = 0;
  std::vector<TensorView> copied_sources_;
  int64_t bytes_ = 0;
};

}  // namespace cohort::model
