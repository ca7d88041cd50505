// Micro-batches: how a pipeline splits one step's batch so that its stages overlap. Stage s
// runs micro-batch i while stage s+1 runs i-1, so a long prompt keeps every stage busy
// instead of passing the whole batch from one stage to the next in turn.
//
// The split never changes a logit. A batch's tokens see the cache and the earlier tokens of
// their sequence, and a micro-batch writes its tokens' KV rows before the next one reads them,
// so attention sees the same rows. The matmul kernels take tokens in groups of 4 (ggml's
// repacked GEMM) and a batch's last n % 4 alone (GEMV), and attention and F32 weights take
// another summation order for batches of 2 or more than for one token (BatchSumOrder), so
// every boundary falls on a multiple of 4 tokens and no micro-batch is shorter than 4 unless
// the batch is: each token then gets the order it gets in the whole batch.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"

namespace cohort::parallel {

struct TokenRange {
  int64_t begin = 0;
  int64_t end = 0;  // exclusive
  int64_t size() const { return end - begin; }
};

inline constexpr int64_t kMicroBatchAlign = 4;

// The ranges [begin, end) covering [0, n_tokens) in order, each about `micro_tokens` long
// (0 or fewer than 2 micro-batches' worth: one range, the whole batch). Appends to *out after
// clearing it, so a caller reuses its vector.
void SplitMicroBatches(int64_t n_tokens, int64_t micro_tokens, std::vector<TokenRange>* out);

// *part = tokens [range.begin, range.end) of batch (positions, sequences and logit flags
// with them), reusing part's vectors.
void SliceBatch(const model::Batch& batch, TokenRange range, model::Batch* part);

}  // namespace cohort::parallel
