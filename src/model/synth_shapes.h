// The real model shapes `cohort synth` can imitate with random weights, for benchmarks and
// tests at real sizes. The weights are noise: the text such a model writes is meaningless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort::model {

struct SynthShape {
  std::string name;          // "llama-3.2-1b", ...
  std::string arch;          // GGUF general.architecture
  std::string vocab;         // vocab-only GGUF (in build/external/vocab) giving the tokenizer
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_ctx = 8192;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied = false;
  bool qk_norm = false;      // qwen3
  // MoE (0 experts = dense).
  int n_expert = 0;
  int n_expert_used = 0;
  int n_ff_expert = 0;
  int n_expert_shared = 0;
  int n_leading_dense = 0;
  int n_group = 0;
  int n_group_used = 0;
  // MLA (deepseek2).
  int q_lora_rank = 0;
  int kv_lora_rank = 0;
  int qk_nope = 0;
  int qk_rope = 0;
  int v_head_dim = 0;
  // YaRN (deepseek2).
  float yarn_factor = 0.0f;
  int yarn_orig_ctx = 0;
};

const std::vector<SynthShape>& SynthShapes();
const SynthShape* FindSynthShape(std::string_view name);

}  // namespace cohort::model
