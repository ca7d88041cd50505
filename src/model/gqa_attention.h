// Grouped-query attention (Llama, Mistral, Qwen2/3): q/k/v projections (optional biases and
// per-head q/k RMSNorm), RoPE, KV-cache append, causal attention, output projection. Computes
// the heads of a HeadRange only, and the output projection over those heads' columns only, so
// a tensor-parallel rank's result is a partial sum to be all-reduced.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/block_env.h"
#include "model/kv_cache.h"

namespace cohort::model {

struct GqaWeights {
  TensorView wq;                    // [n_embd] -> [n_head * head_dim]
  TensorView wk;                    // [n_embd] -> [n_head_kv * head_dim]
  TensorView wv;                    // [n_embd] -> [n_head_kv * head_dim]
  TensorView wo;                    // [n_head * head_dim] -> [n_embd]
  // Qwen2 biases (null when absent).
  const float* bq = nullptr;        // [n_head * head_dim]
  const float* bk = nullptr;        // [n_head_kv * head_dim]
  const float* bv = nullptr;        // [n_head_kv * head_dim]
  // Qwen3 per-head RMSNorm gains applied before RoPE (null when absent).
  const float* q_norm = nullptr;    // [head_dim]
  const float* k_norm = nullptr;    // [head_dim]
  // MiniMax-M2 RMSNorm gains over all heads at once, applied before RoPE (null when absent).
  const float* q_norm_full = nullptr;  // [n_head * head_dim]
  const float* k_norm_full = nullptr;  // [n_head_kv * head_dim]
  // gpt-oss (null when absent): per-head attention-sink logits and the output projection's
  // bias (added once, by the range that starts at head 0, so partial sums still add up).
  const float* sinks = nullptr;     // [n_head]
  const float* bo = nullptr;        // [n_embd]
};

struct GqaParams {
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;                 // key and value width per head
  float kq_scale = 0.0f;
  float rms_eps = 0.0f;             // for q/k norm
  kernels::RopeParams rope;
  int n_swa = 0;                    // > 0: a sliding window of n_swa positions (own included)
};

// Buffers reused across layers and calls; grown on demand, never shrunk.
struct GqaScratch {
  std::vector<float> q, k, v, attn;  // [n_tokens][local heads * head_dim]
  std::vector<float> scores;          // [n_threads][n_ctx]
  std::vector<float> rope_cache;      // [n_rot]
  std::vector<float> norm_sums;       // [n_tokens][2]: full-width q/k sums of squares
};

// out[n_tokens][n_embd] = the attention output of heads `heads` (a partial sum when they are
// not all heads). The cache's K/V rows hold the KV heads of `heads` only, from its first KV
// head on: every KV head any of its query heads belongs to (a range may split a group). x is [n_tokens][n_embd], already normalised.
// Full-width q/k norms of a range that is not all heads sum their squares over env.reducer
// (a failure lands in *env.error).
void GqaAttention(const BlockEnv& env, const GqaWeights& w, const GqaParams& p, HeadRange heads,
                  int layer, const float* x, KvCache& cache, GqaScratch& s, float* out);

}  // namespace cohort::model
