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
  // Gives w a packed copy (TensorView::packed, kernels/pack.h) when the kernels read its type
  // packed, releasing w's mapped pages (w must be a read-only file mapping, as above); w.data
  // stays valid for the readers of plain rows (they fault the pages in again). Returns whether
  // it packed.
  Result<bool> Pack(TensorView& w);
  // Releases the sources of every Pack again (reading a tensor maps its neighbours' pages too:
  // the kernel maps the pages around a fault) and marks them so that later faults on the
  // tensors read in place leave them unmapped.
  void ReleasePackedSources();
  int64_t bytes() const { return bytes_; }

 private:
  // An anonymous mapping of front + bytes; returns the start of the `bytes` part.
  Result<uint8_t*> Allocate(size_t front, size_t bytes);
  // Releases the mapped pages of w's rows (a read-only file mapping refaults them on use).
  static void Release(const TensorView& w);

  struct Region {
    void* base;
    size_t size;
  };
  std::vector<Region> regions_;
  std::vector<TensorView> packed_sources_;
  int64_t bytes_ = 0;
};

}  // namespace cohort::model
