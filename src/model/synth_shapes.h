// The models `cohort synth` can imitate with random weights, for benchmarks and tests at real
// sizes. Their dimensions are plan's built-in shapes (plan::FindBuiltinShape, one table for
// the planner and synth); what is kept here is only what a GGUF needs beyond dimensions: the
// architecture, the tokenizer and the rope, norm and routing settings. The weights are noise:
// the text such a model writes is meaningless.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cohort::model {

struct SynthModel {
  std::string name;          // a plan::BuiltinShapes() name: "llama-3.2-1b", ...
  std::string arch;          // GGUF general.architecture
  std::string vocab;         // vocab-only GGUF (in build/external/vocab) giving the tokenizer
  int n_ctx = 8192;
  float rope_base = 10000.0f;
  float rms_eps = 1e-5f;
  // Grouped expert selection (deepseek2).
  int n_group = 0;
  int n_group_used = 0;
  // YaRN (deepseek2).
  float yarn_factor = 0.0f;
  int yarn_orig_ctx = 0;
  // Dimensions rotated per head (glm4moe, minimax-m2: 64 of 128); 0: the whole head.
  int rope_dim = 0;
  float expert_weights_scale = 1.0f;  // glm4moe's routed_scaling_factor
  // Sliding-window attention on every other layer (gpt-oss); 0: none.
  int n_swa = 0;
};

const std::vector<SynthModel>& SynthModels();
const SynthModel* FindSynthModel(std::string_view name);

}  // namespace cohort::model
