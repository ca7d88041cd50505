// qwen3 and qwen3moe architectures: GQA attention with per-head q/k RMSNorm before NEOX RoPE,
// no biases; qwen3 has a SiLU-GLU FFN, qwen3moe softmax-routed experts with renormalised
// top-k weights in every layer.
#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {

Result<std::unique_ptr<Model>> LoadQwen3(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kQwen3);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && c.qk_norm && !c.qkv_bias);
  if (c.moe.n_expert > 0) return Unsupported("qwen3: expert layers belong to qwen3moe");
  auto model = LoadGqaModel(file, c);
  if (!model.ok()) return model.status().Annotate("qwen3");
  return model;
}

Result<std::unique_ptr<Model>> LoadQwen3Moe(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kQwen3Moe);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && c.qk_norm && c.moe.norm_top_k);
  if (c.moe.n_expert == 0) return Corrupt("qwen3moe: expert_count is missing or 0");
  if (c.moe.gating != ExpertGating::kSoftmax || c.moe.n_leading_dense != 0) {
    return Unsupported("qwen3moe: only softmax gating in every layer is supported");
  }
  auto model = LoadGqaModel(file, c);
  if (!model.ok()) return model.status().Annotate("qwen3moe");
  return model;
}

}  // namespace cohort::model
