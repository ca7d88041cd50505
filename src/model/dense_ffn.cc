// DenseFfn; see dense_ffn.h.
#include "model/dense_ffn.h"

#include "core/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace cohort::model {

void DenseFfn(ThreadPool* pool, std::vector<uint8_t>* matmul_scratch, const DenseFfnWeights& w,
              ColumnRange cols, const float* x, int n_tokens, DenseFfnScratch& s, float* out) {
  COHORT_CHECK(0 <= cols.begin && cols.begin < cols.end && cols.end <= w.n_ff());
  const int64_t width = cols.size();
  s.gate.resize(n_tokens * width);
  s.up.resize(n_tokens * width);
  const kernels::MatMulProduct gate_up[] = {{w.gate.Rows(cols.begin, cols.end), x, n_tokens, s.gate.data()},
                                            {w.up.Rows(cols.begin, cols.end), x, n_tokens, s.up.data()}};
  kernels::MatMulBatch(gate_up, pool, matmul_scratch);
  // Row by row: the op's SIMD-chunk/tail split is per row, as in ggml.
  for (int t = 0; t < n_tokens; ++t) {
    kernels::SwiGlu(s.gate.data() + t * width, s.up.data() + t * width, width, s.gate.data() + t * width);
  }
  kernels::MatMul(ColumnSlice(w.down, cols.begin, cols.end), s.gate.data(), n_tokens, out, pool,
                  matmul_scratch);
}

}  // namespace cohort::model
