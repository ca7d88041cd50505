// What every forward block needs besides its weights: the thread pool, the batch's token
// positions and sequences, and the shared matmul scratch. Plus the slice types that say which
// part of a layer a block computes (a tensor-parallel rank computes a part; one rank, all).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace cohort::model {

class PartialSumReducer;  // decoder.h

struct BlockEnv {
  ThreadPool* pool = nullptr;             // may be null: everything runs inline
  int n_tokens = 0;
  const int32_t* positions = nullptr;     // [n_tokens]
  const int32_t* seq_ids = nullptr;       // [n_tokens]
  std::vector<uint8_t>* matmul_scratch = nullptr;
  // The tensor-parallel group's sum, for a block that needs one inside it (minimax-m2's q/k
  // norm over heads that ranks split); null when this instance computes whole layers.
  PartialSumReducer* reducer = nullptr;
  Status* error = nullptr;                // where such a block reports a failed sum
};

// Attention heads [begin, end). A rank owns whole KV-head groups, so for GQA begin and end are
// multiples of n_head / n_head_kv.
struct HeadRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
};

// FFN columns (intermediate features) [begin, end); multiples of the weight's quant block.
struct ColumnRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Routed experts [begin, end) evaluated by this rank (routing itself is computed in full).
struct ExpertRange {
  int begin = 0;
  int end = 0;
};

// Runs fn(thread_index, n_threads) on the pool, or inline when there is none.
void RunOnPool(ThreadPool* pool, const std::function<void(int, int)>& fn);

// A view of columns [begin, end) of every row of w (ne[0] shrinks, the row stride stays), so a
// matmul over it is a partial product over those input features. begin and end must fall on
// quant block boundaries.
TensorView ColumnSlice(const TensorView& w, int64_t begin, int64_t end);

}  // namespace cohort::model
