// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) in llama.cpp's "absorbed" form: the KV
// cache holds one row per token, [c ; k_pe] (the normalised latent and the shared rotated key
// part), and each head's query is mapped into latent space by attn_k_b, so attention runs as
// MQA over the latent; attn_v_b then maps each head's latent output to its value width.
// Computes heads of a HeadRange only, with the output projection over their columns only.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "kernels/ops.h"
#include "model/block_env.h"
#include "model/kv_cache.h"

namespace cohort::model {

struct MlaWeights {
  // Low-rank query (q_lora_rank > 0): q = q_b(rmsnorm(q_a x) * q_a_norm); otherwise q = wq x.
  TensorView q_a;                    // [n_embd] -> [q_lora]
  const float* q_a_norm = nullptr;   // [q_lora]
  TensorView q_b;                    // [q_lora] -> [n_head * (nope + rope)]
  TensorView wq;                     // [n_embd] -> [n_head * (nope + rope)]
  TensorView kv_a_mqa;               // [n_embd] -> [kv_lora + rope]
  const float* kv_a_norm = nullptr;  // [kv_lora]
  TensorView k_b;                    // ne {nope, kv_lora, n_head}: head h maps q_nope -> latent
  TensorView v_b;                    // ne {kv_lora, v_dim, n_head}: head h maps latent -> value
  TensorView wo;                     // [n_head * v_dim] -> [n_embd]
};

struct MlaParams {
  int n_embd = 0;
  int n_head = 0;
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
  float kq_scale = 0.0f;
  float rms_eps = 0.0f;
  kernels::RopeParams rope;
};

struct MlaScratch {
  std::vector<float> q_lora;   // [n_tokens][q_lora]
  std::vector<float> q;        // [n_tokens][local heads][nope + rope]
  std::vector<float> kv;       // [n_tokens][kv_lora + rope]
  std::vector<float> q_nope;   // [n_tokens][nope], one head
  std::vector<float> q_abs;    // [n_tokens][kv_lora], one head
  std::vector<float> q_full;   // [n_tokens][local heads][kv_lora + rope]
  std::vector<float> latent;   // [n_tokens][local heads][kv_lora]
  std::vector<float> latent_h; // [n_tokens][kv_lora], one head
  std::vector<float> v_h;      // [n_tokens][v_dim], one head
  std::vector<float> attn;     // [n_tokens][local heads * v_dim]
  std::vector<float> scores;   // [n_threads][n_ctx]
  std::vector<float> rope_cache;
};

// out[n_tokens][n_embd] = the attention output of heads `heads`; the cache rows have width
// kv_lora + rope and no separate value rows.
void MlaAttention(const BlockEnv& env, const MlaWeights& w, const MlaParams& p, HeadRange heads,
                  int layer, const float* x, KvCache& cache, MlaScratch& s, float* out);

}  // namespace cohort::model
