// Gated DeltaNet linear attention (Qwen3.5, Qwen3-Next), as llama.cpp computes it: in-
// projections to the mixed q/k/v channels, the gate z and the per-head beta and alpha; a short
// causal conv1d over the mixed channels (its last conv_kernel - 1 inputs kept per sequence)
// and SiLU; per-head L2 norm of q and k; then per value head h (key head h % k_heads) and
// token, with g = softplus(alpha + dt_bias) * a and b = sigmoid(beta):
//   S *= exp(g);  d = b (v - S k);  S += d k^T;  o = S q / sqrt(head_dim)
// (S[j][i]: value index j, key index i); o is RMS-normed per head with ssm_norm and gated by
// silu(z), then projected out. Tokens run in batch order, each on its own sequence's state,
// so a batch may mix sequences (continuous batching) and a prompt is the one-token step
// repeated: the same recurrence as llama.cpp's fused CPU op.
//
// Tensor parallelism splits a layer by key heads: a rank computes key heads [kb, ke) and the
// value heads that read them (h % k_heads in [kb, ke), so value heads j * k_heads + [kb, ke)
// for every j): their rows of the in-projections, their conv channels (and conv state), their
// DeltaNet states, and the output projection over their columns, a partial sum that the
// decoder all-reduces like attention's output projection.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "model/block_env.h"
#include "model/config.h"
#include "model/recurrent_state.h"

namespace cohort::model {

struct DeltaNetWeights {
  TensorView wqkv;                // attn_qkv: [n_embd] -> [conv_channels] (q, k, v)
  TensorView wz;                  // attn_gate: [n_embd] -> [value_width]
  TensorView wbeta;               // ssm_beta: [n_embd] -> [v_heads]
  TensorView walpha;              // ssm_alpha: [n_embd] -> [v_heads]
  const float* conv = nullptr;    // ssm_conv1d: [conv_channels][conv_kernel]
  const float* dt_bias = nullptr; // ssm_dt.bias: [v_heads]
  const float* a = nullptr;       // ssm_a: [v_heads] (-exp(A_log))
  const float* norm = nullptr;    // ssm_norm: [head_dim]
  TensorView wout;                // ssm_out: [value_width] -> [n_embd]
};

struct DeltaNetScratch {
  std::vector<float> qkv, conv, z, beta, alpha, o;  // [n_tokens][...] (o: [piece][n_tokens][...])
  std::vector<float> proj, partial;                 // in-projection pieces; one output piece
};

// The key heads a tensor-parallel rank whose attention heads are attn_heads computes in the
// DeltaNet layers: the same fraction of the key heads, [begin * k_heads / n_head, end *
// k_heads / n_head), so the ranks of a group tile them as their attention heads tile n_head.
// Empty when the model has fewer key heads than the split needs.
HeadRange DeltaNetHeadsOf(const ModelConfig& c, HeadRange attn_heads);

// Floats of one (layer, sequence)'s state for a rank of n_k key heads (all: c.k_heads).
inline int64_t DeltaNetConvFloats(const HybridConfig& c, int n_k) {
  const int64_t v_per_k = c.v_heads / c.k_heads;
  return (2 + v_per_k) * n_k * c.head_dim * (c.conv_kernel - 1);
}
inline int64_t DeltaNetStateFloats(const HybridConfig& c, int n_k) {
  return static_cast<int64_t>(c.v_heads / c.k_heads) * n_k * c.head_dim * c.head_dim;
}

// out[n_tokens][n_embd] = the DeltaNet block of key heads k_heads (and their value heads) over
// normalised x[n_tokens][n_embd], reading and advancing state layer `state_layer` of each
// token's sequence: the whole block when k_heads is all of them, else a partial sum.
void DeltaNet(const BlockEnv& env, const DeltaNetWeights& w, const HybridConfig& c, HeadRange k_heads,
              float eps, int state_layer, const float* x, RecurrentState& state, DeltaNetScratch& s,
              float* out);

// One token of one value head: the state update and output above (q, k already L2-normed).
// Exposed for tests.
void DeltaNetStep(int64_t head_dim, const float* q, const float* k, const float* v, float g,
                  float beta, float* state, float* o);

}  // namespace cohort::model
