// Helpers for the "N ranks equal 1 rank" tests: a trace of a model (logits of every prompt
// position, then greedy steps) and its comparison with another trace.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/context.h"
#include "model/model.h"

namespace cohort::parallel::testing {

inline std::string FixtureModel(const std::string& name) {
  return std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf";
}

struct Trace {
  std::vector<float> logits;  // [n_prompt + n_gen][n_vocab]
  std::vector<int32_t> ids;   // greedy ids, one per step
};

inline int32_t Argmax(const float* row, int n) {
  int32_t best = 0;
  for (int v = 1; v < n; ++v) {
    if (row[v] > row[best]) best = v;
  }
  return best;
}

// The fixtures' prompt [1, 10, ..., 150] as one batch wanting every row, then n_gen greedy
// steps of one token each.
inline Status RunTrace(model::Model& m, const Context& ctx, model::KvCache& cache, int n_gen,
                       Trace* trace) {
  const int n_vocab = m.config().n_vocab;
  model::Batch b;
  for (int i = 0; i < 16; ++i) b.Add(i == 0 ? 1 : 10 * i, i, 0, true);
  std::vector<float> rows(16 * n_vocab);
  COHORT_RETURN_IF_ERROR(m.Forward(ctx, b, cache, rows));
  trace->logits = rows;
  int32_t next = Argmax(rows.data() + 15 * n_vocab, n_vocab);
  for (int k = 0; k < n_gen; ++k) {
    trace->ids.push_back(next);
    b.Clear();
    b.Add(next, 16 + k, 0, true);
    std::vector<float> row(n_vocab);
    COHORT_RETURN_IF_ERROR(m.Forward(ctx, b, cache, row));
    trace->logits.insert(trace->logits.end(), row.begin(), row.end());
    next = Argmax(row.data(), n_vocab);
  }
  trace->ids.push_back(next);
  return Status::Ok();
}

inline void ExpectSameTrace(const Trace& got, const Trace& want, float tol) {
  ASSERT_EQ(got.logits.size(), want.logits.size());
  float max_diff = 0.0f;
  for (size_t i = 0; i < got.logits.size(); ++i) {
    const float d = std::fabs(got.logits[i] - want.logits[i]);
    max_diff = std::isnan(d) ? INFINITY : std::max(max_diff, d);
  }
  EXPECT_LE(max_diff, tol);
  EXPECT_EQ(got.ids, want.ids);
}

}  // namespace cohort::parallel::testing
