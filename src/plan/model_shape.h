// What the planner knows about a model: its dimensions (enough to count the parameters of
// every tensor class), the bits per weight of each class under a quantization scheme, and
// built-in shapes of published models (from their config.json files) and of the scaled-down
// models `cohort synth` writes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/shard_plan.h"

namespace cohort::plan {

// Dimensions of a decoder-only transformer (GQA or DeepSeek-style MLA attention, dense or
// MoE FFN). Parameter counts ignore norms and biases (< 0.01% of any model here).
struct ModelShape {
  std::string name;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  // GQA KV heads. MLA: not used by the planner, which splits query heads (a GGUF stores 1,
  // llama.cpp's MQA over the latent; the built-in shapes keep config.json's n_head).
  int n_head_kv = 0;
  int head_dim = 0;    // GQA: per-head width of q and k (GGUF attention.key_length)
  int head_dim_v = 0;  // GQA: per-head width of v; 0 (a shape from before it was kept) = head_dim
  // MLA (multi-head latent attention, DeepSeek-V3 / Kimi K2); kv_lora_rank > 0 selects it.
  int q_lora_rank = 0;  // 0: q projected directly from the hidden state
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int qk_rope_dim = 0;
  int v_head_dim = 0;
  int n_ff = 0;            // dense FFN width (dense models, and MoE models' leading dense layers)
  int n_leading_dense = 0; // MoE models: first layers with a dense FFN
  int n_expert = 0;        // routed experts per MoE layer (0: dense model)
  int n_expert_used = 0;   // routed experts per token
  int n_ff_expert = 0;
  int n_expert_shared = 0; // shared experts, each n_ff_expert wide
  int n_vocab = 0;
  bool tied_embeddings = false;
  // Next-token-prediction (MTP) blocks stored after the n_layer blocks (glm4moe's
  // nextn_predict_layers): in the file, never run, so not counted in the parameters here.
  int n_nextn_layer = 0;
  // Hybrid linear attention (Qwen3.5, Qwen3-Next: gated DeltaNet layers between gated full-
  // attention layers); ssm_v_heads > 0 selects it. GGUF keys ssm.*, full_attention_interval,
  // attention.recurrent_layers.
  int ssm_conv_kernel = 0;   // ssm.conv_kernel: causal conv1d width
  int ssm_head_dim = 0;      // ssm.state_size: key and value head width of the DeltaNet heads
  int ssm_k_heads = 0;       // ssm.group_count
  int ssm_v_heads = 0;       // ssm.time_step_rank
  int full_attn_interval = 0;            // every n-th layer is full attention (when no list)
  std::vector<uint8_t> recurrent_layers; // per layer, 1: DeltaNet (empty: by the interval)

  Status Validate() const;
  bool is_moe() const { return n_expert > 0; }
  bool is_mla() const { return kv_lora_rank > 0; }
  int n_moe_layers() const { return is_moe() ? n_layer - n_leading_dense : 0; }
  int n_dense_layers() const { return n_layer - n_moe_layers(); }
  int v_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  bool is_hybrid() const { return ssm_v_heads > 0; }
  bool is_recurrent_layer(int layer) const;
  int n_recurrent_layers() const;
  // A DeltaNet layer's parameters (in-projections, conv, gates, output projection).
  double LinearAttnParams() const;
  // Per sequence: the conv and DeltaNet state floats of all recurrent layers.
  double RecurrentStateElements() const;

  // Attention parameters of one layer, as replicated + per query head + per KV head.
  double AttnReplicatedParams() const;
  double AttnPerQHeadParams() const;
  double AttnPerKvHeadParams() const;
  double AttnParams() const;
  double DenseFfnParams() const { return 3.0 * n_embd * n_ff; }
  double ExpertParams() const { return 3.0 * n_embd * n_ff_expert; }  // one routed expert
  double SharedExpertParams() const { return n_expert_shared * ExpertParams(); }
  double RouterParams() const { return static_cast<double>(n_embd) * n_expert; }
  double EmbeddingParams() const { return static_cast<double>(n_vocab) * n_embd; }
  double TotalParams() const;
  double ActiveParams() const;  // read per token at batch 1 (embedding: one row)
  // KV-cache elements per token of context per layer (MLA caches the latent and rope key).
  double KvElementsPerToken() const;

  // The dimensions a ShardPlan needs; `block` is the quant block for column slices.
  plan::PlanShape ToPlanShape(int block) const;
};

// Bits per weight of each tensor class. Block scales are included (Q8_0: 8.5 bits).
struct QuantScheme {
  std::string name;
  double bits_expert = 16;  // routed experts
  double bits_dense = 16;   // attention, dense FFN, shared experts, router
  double bits_embd = 16;    // token embedding
  double bits_output = 16;  // output matrix
  int block = 32;           // quant block width for column slices (K-quants: 256)
  std::string note;         // what produces files like this
};

std::vector<ModelShape> BuiltinShapes();
Result<ModelShape> FindBuiltinShape(const std::string& name);
std::vector<QuantScheme> BuiltinQuants();
Result<QuantScheme> FindBuiltinQuant(const std::string& name);

}  // namespace cohort::plan
