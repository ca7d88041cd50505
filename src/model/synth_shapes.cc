// The settings `cohort synth` writes beside each built-in shape, from the models' published
// configs (config.json on their model cards); the dimensions are plan's table.
#include "model/synth_shapes.h"

namespace cohort::model {

const std::vector<SynthModel>& SynthModels() {
  static const std::vector<SynthModel> models = [] {
    std::vector<SynthModel> s;
    {
      SynthModel x;  // meta-llama/Llama-3.2-1B
      x.name = "llama-3.2-1b"; x.arch = "llama"; x.vocab = "ggml-vocab-llama-bpe.gguf";
      x.rope_base = 500000.0f;
      s.push_back(x);
    }
    for (const char* name : {"qwen3-0.6b", "qwen3-1.7b"}) {
      SynthModel x;  // Qwen/Qwen3-0.6B, Qwen/Qwen3-1.7B
      x.name = name; x.arch = "qwen3"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.rope_base = 1000000.0f; x.rms_eps = 1e-6f;
      s.push_back(x);
    }
    {
      SynthModel x;  // Qwen3-30B-A3B's settings
      x.name = "qwen3-30b-a3b-mini"; x.arch = "qwen3moe"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.rope_base = 1000000.0f; x.rms_eps = 1e-6f;
      s.push_back(x);
    }
    {
      SynthModel x;  // DeepSeek-V3's YaRN x40 and sigmoid routing with 8 groups / 4 used
      x.name = "deepseek-v3-mini"; x.arch = "deepseek2"; x.vocab = "ggml-vocab-deepseek-llm.gguf";
      x.rms_eps = 1e-6f; x.n_ctx = 16384;
      x.n_group = 8; x.n_group_used = 4;
      x.yarn_factor = 40.0f; x.yarn_orig_ctx = 4096;
      s.push_back(x);
    }
    // zai-org/GLM-4.5-Air: rope_theta 1e6, partial_rotary_factor 0.5, rms_norm_eps 1e-5,
    // routed_scaling_factor 1.0, norm_topk_prob true, attention_bias true. The mini takes
    // GLM-4.5's (355B) scaling factor 2.5 so that its files exercise the scale. There is no
    // GLM vocabulary among the test data: Qwen2's BPE stands in (both are ~151k-token BPEs).
    for (const char* name : {"glm-4.5-air", "glm-4.5-air-mini"}) {
      SynthModel x;
      x.name = name; x.arch = "glm4moe"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.rope_base = 1000000.0f; x.n_ctx = 131072; x.rope_dim = 64;
      x.expert_weights_scale = std::string_view(name) == "glm-4.5-air" ? 1.0f : 2.5f;
      s.push_back(x);
    }
    // MiniMaxAI/MiniMax-M2: rope_theta 5e6, rotary_dim 64, rms_norm_eps 1e-6, sigmoid
    // scoring with a routing bias. Qwen2's BPE stands in for its 200k vocabulary too.
    for (const char* name : {"minimax-m2", "minimax-m2-mini"}) {
      SynthModel x;
      x.name = name; x.arch = "minimax-m2"; x.vocab = "ggml-vocab-qwen2.gguf";
      x.rope_base = 5000000.0f; x.rms_eps = 1e-6f; x.n_ctx = 196608; x.rope_dim = 64;
      s.push_back(x);
    }
    for (const char* name : {"qwen3.5-397b-a17b", "qwen3.5-35b-a3b", "qwen3.5-35b-a3b-mini"}) {
      SynthModel x;  // Qwen/Qwen3.5-397B-A17B, Qwen/Qwen3.5-35B-A3B
      x.name = name; x.arch = "qwen35moe"; x.vocab = "ggml-vocab-qwen35.gguf";
      x.rope_base = 10000000.0f; x.rms_eps = 1e-6f; x.n_ctx = 262144;
      s.push_back(x);
    }
    {
      SynthModel x;  // Qwen/Qwen3.5-0.8B
      x.name = "qwen3.5-0.8b"; x.arch = "qwen35"; x.vocab = "ggml-vocab-qwen35.gguf";
      x.rope_base = 10000000.0f; x.rms_eps = 1e-6f; x.n_ctx = 262144;
      s.push_back(x);
    }
    // openai/gpt-oss-120b and -20b (config.json): YaRN x32 over 4096, base 150000, a
    // 128-position window on the even layers. The -mini shape keeps the 120B's layer structure
    // with 12 layers and 32 experts; gpt-oss-test is tiny, with a window of 8 positions so
    // that a short prompt crosses it (the golden test's model).
    for (const char* name : {"gpt-oss-120b", "gpt-oss-20b", "gpt-oss-120b-mini", "gpt-oss-test"}) {
      SynthModel x;
      x.name = name; x.arch = "gpt-oss"; x.vocab = "ggml-vocab-gpt-2.gguf";
      x.rope_base = 150000.0f; x.n_ctx = 131072;
      x.yarn_factor = 32.0f; x.yarn_orig_ctx = 4096;
      x.n_swa = std::string_view(name) == "gpt-oss-test" ? 8 : 128;
      s.push_back(x);
    }
    return s;
  }();
  return models;
}

const SynthModel* FindSynthModel(std::string_view name) {
  for (const SynthModel& s : SynthModels()) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

}  // namespace cohort::model
