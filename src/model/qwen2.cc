// qwen2 architecture (Qwen2, Qwen2.5): GQA attention with q/k/v biases and NEOX RoPE,
// SiLU-GLU FFN, usually tied embeddings.
#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {

Result<std::unique_ptr<Model>> LoadQwen2(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kQwen2);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && c.qkv_bias && !c.qk_norm);
  if (c.moe.n_expert > 0) return Unsupported("qwen2: expert layers belong to qwen2moe");
  auto model = LoadGqaModel(file, c);
  if (!model.ok()) return model.status().Annotate("qwen2");
  return model;
}

}  // namespace cohort::model
