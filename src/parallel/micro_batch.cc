// Micro-batches; see micro_batch.h.
#include "parallel/micro_batch.h"

#include <algorithm>

#include "core/check.h"

namespace cohort::parallel {

void SplitMicroBatches(int64_t n_tokens, int64_t micro_tokens, std::vector<TokenRange>* out) {
  COHORT_CHECK_GE(n_tokens, 0);
  out->clear();
  if (n_tokens == 0) return;
  const int64_t count = micro_tokens > 0 ? n_tokens / std::max(micro_tokens, kMicroBatchAlign) : 0;
  if (count < 2) {
    out->push_back({0, n_tokens});
    return;
  }
  // Even shares (the stages' rhythm is the slowest micro-batch), rounded up to the alignment.
  const int64_t even = (n_tokens + count - 1) / count;
  const int64_t size = (even + kMicroBatchAlign - 1) / kMicroBatchAlign * kMicroBatchAlign;
  for (int64_t begin = 0; begin < n_tokens; begin += size) {
    out->push_back({begin, std::min(n_tokens, begin + size)});
  }
  // A tail shorter than the alignment would take the single-token order: it joins the range
  // before it (whose length stays a multiple of 4 plus the batch's own n % 4).
  if (out->size() > 1 && out->back().size() < kMicroBatchAlign) {
    const int64_t end = out->back().end;
    out->pop_back();
    out->back().end = end;
  }
}

void SliceBatch(const model::Batch& batch, TokenRange range, model::Batch* part) {
  COHORT_CHECK(range.begin >= 0 && range.begin <= range.end &&
               range.end <= static_cast<int64_t>(batch.size()));
  const auto slice = [&](const auto& from, auto& to) {
    to.assign(from.begin() + range.begin, from.begin() + range.end);
  };
  slice(batch.tokens, part->tokens);
  slice(batch.positions, part->positions);
  slice(batch.seq_ids, part->seq_ids);
  slice(batch.want_logits, part->want_logits);
}

}  // namespace cohort::parallel
