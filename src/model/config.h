// ModelConfig: the hyperparameters of one model, parsed once from GGUF metadata and checked,
// so that forward code never reads metadata or guesses a default.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::gguf {
class File;
}

namespace cohort::model {

enum class Arch { kLlama, kQwen2, kQwen3, kQwen3Moe, kDeepseek2, kGlm4Moe, kMinimaxM2, kQwen35, kQwen35Moe, kGptOss };
const char* ArchName(Arch arch);

enum class RopeType { kNorm, kNeox };  // adjacent pairs vs. halves
// kSoftmaxWeight (gpt-oss): experts chosen by the raw logits, softmax over the chosen ones only.
enum class ExpertGating { kSoftmax, kSigmoid, kSoftmaxWeight };
// The experts' activation: SiLU-GLU, or gpt-oss's clamped SwiGLU (kernels::SwiGluOai).
enum class ExpertActivation { kSwiGlu, kSwiGluOai };

// How a sequence's final hidden states become one embedding (`<arch>.pooling_type`, llama.cpp's
// numbering): none, the mean of every position, the first position's (CLS), the last one's.
enum class Pooling { kNone = 0, kMean = 1, kCls = 2, kLast = 3, kRank = 4 };
const char* PoolingName(Pooling pooling);

struct RopeConfig {
  RopeType type = RopeType::kNorm;
  int n_rot = 0;                 // dimensions rotated per head
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;       // 1 / rope.scaling.factor for linear/yarn
  // YaRN (DeepSeek-V3 / Kimi-K2 use it): active when yarn is true.
  bool yarn = false;
  int n_ctx_orig = 0;
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  float yarn_log_mul = 0.0f;     // rope.scaling.yarn_log_multiplier (deepseek2 mscale)
};

struct MoeConfig {
  int n_expert = 0;              // 0 = dense model
  int n_expert_used = 0;
  int n_ff_expert = 0;
  int n_expert_shared = 0;
  int n_leading_dense = 0;       // first layers with a dense FFN (deepseek2)
  ExpertGating gating = ExpertGating::kSoftmax;
  bool norm_top_k = false;       // renormalise the chosen weights to sum 1
  float weights_scale = 1.0f;
  int n_group = 1;               // grouped expert selection (DeepSeek-V3: 8 groups)
  int n_group_used = 1;
  ExpertActivation activation = ExpertActivation::kSwiGlu;
  float oai_alpha = 1.702f;      // kSwiGluOai's constants (llama.cpp's, fixed for gpt-oss)
  float oai_limit = 7.0f;
};

struct MlaConfig {               // deepseek2 multi-head latent attention
  int q_lora_rank = 0;           // 0: q is a plain projection
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
};

// Gated DeltaNet layers (qwen35, qwen35moe): linear attention with a short causal conv1d and
// a per-sequence recurrent state, between gated full-attention layers.
struct HybridConfig {
  int conv_kernel = 0;             // ssm.conv_kernel
  int head_dim = 0;                // ssm.state_size: key and value head width
  int k_heads = 0;                 // ssm.group_count
  int v_heads = 0;                 // ssm.time_step_rank (a multiple of k_heads)
  std::vector<uint8_t> recurrent;  // [n_layer] 1: DeltaNet layer; empty: not a hybrid model
  bool enabled() const { return !recurrent.empty(); }
  bool is_recurrent(int layer) const { return enabled() && recurrent[layer] != 0; }
  int64_t key_width() const { return static_cast<int64_t>(k_heads) * head_dim; }
  int64_t value_width() const { return static_cast<int64_t>(v_heads) * head_dim; }
  int64_t conv_channels() const { return 2 * key_width() + value_width(); }
};

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string name;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  // Per-head query/key and value widths. For deepseek2 these are llama.cpp's "MQA over the
  // latent" widths (key_length = kv_lora + rope, value_length = kv_lora); the real per-head
  // MLA widths are in `mla`.
  int head_dim_k = 0;
  int head_dim_v = 0;
  int n_ff = 0;                  // dense FFN width
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float kq_scale = 0.0f;         // softmax scale applied to q·k (deepseek2: with YaRN mscale²)
  bool tied_output = false;      // LM head is token_embd
  bool qkv_bias = false;
  bool qk_norm = false;          // per-head q/k RMSNorm ([head_dim] gains)
  // minimax-m2: q and k RMS-normalised over all heads at once ([n_head * head_dim] and
  // [n_head_kv * head_dim] gains), before RoPE.
  bool qk_norm_full = false;
  // Next-token-prediction blocks after the n_layer trunk blocks (glm4moe): not run.
  int n_nextn_layer = 0;
  // Sliding-window attention (gpt-oss): layers for which is_swa_layer holds attend only the
  // last n_swa positions (their own included); 0: every layer attends all positions.
  int n_swa = 0;
  int swa_pattern = 0;           // layer il slides when il % swa_pattern < swa_pattern - 1
  float rope_freq_base_swa = 0;  // the sliding layers' rope base (0: rope.freq_base)
  bool attn_sinks = false;       // a learned per-head logit in each softmax's denominator
  bool attn_out_bias = false;    // attn_output.bias
  Pooling pooling = Pooling::kNone;  // the file's embedding pooling (kNone: not an embedding model)
  RopeConfig rope;
  MoeConfig moe;
  MlaConfig mla;
  HybridConfig ssm;

  static Result<ModelConfig> FromGguf(const gguf::File& file);
  Status Validate() const;
  bool is_moe_layer(int layer) const { return moe.n_expert > 0 && layer >= moe.n_leading_dense; }
  bool is_swa_layer(int layer) const {
    return n_swa > 0 && (swa_pattern == 0 || layer % swa_pattern < swa_pattern - 1);
  }
  std::string ToString() const;
};

}  // namespace cohort::model
