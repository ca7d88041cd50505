// The SiLU-gated feed-forward block, down(silu(gate(x)) * up(x)), over a column range of the
// intermediate features so a tensor-parallel rank's result is a partial sum.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "model/block_env.h"

namespace cohort::model {

struct DenseFfnWeights {
  TensorView gate;  // [n_embd] -> [n_ff]
  TensorView up;    // [n_embd] -> [n_ff]
  TensorView down;  // [n_ff] -> [n_embd]
  int64_t n_ff() const { return gate.ne[1]; }
};

struct DenseFfnScratch {
  std::vector<float> gate, up;  // [n_tokens][columns]
};

// out[n_tokens][n_embd] = down[:, cols] (silu(gate[cols] x) * up[cols] x) for x [n_tokens][n_embd].
void DenseFfn(ThreadPool* pool, std::vector<uint8_t>* matmul_scratch, const DenseFfnWeights& w,
              ColumnRange cols, const float* x, int n_tokens, DenseFfnScratch& s, float* out);

}  // namespace cohort::model
