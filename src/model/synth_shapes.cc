// Built-in shapes for `cohort synth`, copied from the models' published configs
// (config.json on their model cards); the scaled-down MoE shapes keep the real layer
// structure with fewer layers and experts so that they fit a small machine.
#include "model/synth_shapes.h"

namespace cohort::model {

const std::vector<SynthShape>& SynthShapes() {
  static const std::vector<SynthShape> shapes = [] {
    std::vector<SynthShape> s;
    {
      SynthShape x;  // meta-llama/Llama-3.2-1B: 16 layers, GQA 32/8, tied embeddings
      x.name = "llama-3.2-1b"; x.arch = "llama"; x.vocab = "ggml-vocab-llama-bpe.gguf";
      x.n_embd = 2048; x.n_layer = 16; x.n_head = 32; x.n_head_kv = 8; x.head_dim = 64;
      x.n_ff = 8192; x.rope_base = 500000.0f; x.tied = true;
      s.push_back(x);
    }
    {
      SynthShape x;  // Qwen/Qwen3-0.6B
      x.name = "qwen3-0.6b"; x.arch = "qwen3"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.n_embd = 1024; x.n_layer = 28; x.n_head = 16; x.n_head_kv = 8; x.head_dim = 128;
      x.n_ff = 3072; x.rope_base = 1000000.0f; x.rms_eps = 1e-6f; x.tied = true; x.qk_norm = true;
      s.push_back(x);
    }
    {
      SynthShape x;  // Qwen/Qwen3-1.7B
      x.name = "qwen3-1.7b"; x.arch = "qwen3"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.n_embd = 2048; x.n_layer = 28; x.n_head = 16; x.n_head_kv = 8; x.head_dim = 128;
      x.n_ff = 6144; x.rope_base = 1000000.0f; x.rms_eps = 1e-6f; x.tied = true; x.qk_norm = true;
      s.push_back(x);
    }
    {
      SynthShape x;  // Qwen3-30B-A3B scaled down: its per-layer structure (GQA 32/4, 128-dim
                     // heads, 768-wide experts, 8 of them active) with 12 layers and 32 experts.
      x.name = "qwen3-30b-a3b-mini"; x.arch = "qwen3moe"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.n_embd = 2048; x.n_layer = 12; x.n_head = 32; x.n_head_kv = 4; x.head_dim = 128;
      x.n_ff = 6144; x.rope_base = 1000000.0f; x.rms_eps = 1e-6f; x.qk_norm = true;
      x.n_expert = 32; x.n_expert_used = 8; x.n_ff_expert = 768;
      s.push_back(x);
    }
    {
      SynthShape x;  // DeepSeek-V3 scaled down: MLA with V3's head geometry (nope 128, rope 64,
                     // v 128), YaRN x40, sigmoid routing with 8 groups / 4 used, one shared expert,
                     // one leading dense layer; 6 layers, 32 experts, narrower everything else.
      x.name = "deepseek-v3-mini"; x.arch = "deepseek2"; x.vocab = "ggml-vocab-deepseek-llm.gguf";
      x.n_embd = 1024; x.n_layer = 6; x.n_head = 16; x.n_head_kv = 1; x.head_dim = 192;
      x.n_ff = 2816; x.rms_eps = 1e-6f; x.n_ctx = 16384;
      x.q_lora_rank = 384; x.kv_lora_rank = 256; x.qk_nope = 128; x.qk_rope = 64; x.v_head_dim = 128;
      x.n_expert = 32; x.n_expert_used = 8; x.n_ff_expert = 256; x.n_expert_shared = 1;
      x.n_leading_dense = 1; x.n_group = 8; x.n_group_used = 4;
      x.yarn_factor = 40.0f; x.yarn_orig_ctx = 4096;
      s.push_back(x);
    }
    return s;
  }();
  return shapes;
}

const SynthShape* FindSynthShape(std::string_view name) {
  for (const SynthShape& s : SynthShapes()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace cohort::model
