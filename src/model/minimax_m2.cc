// minimax-m2 architecture (MiniMax-M2, M2.1, M2.5): GQA attention whose q and k are
// RMS-normalised over all heads at once (attn_q_norm [n_head * head_dim], attn_k_norm
// [n_head_kv * head_dim]) before NEOX RoPE on part of each head (rotary_dim 64 of 128), then
// in every layer sigmoid-routed experts with a selection bias (exp_probs_b) and renormalised
// top-k weights; no shared expert, no dense layer. Biases are loaded when the file has them,
// as llama.cpp's loader does.
#include <fmt/format.h>

#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {

Result<std::unique_ptr<Model>> LoadMinimaxM2(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kMinimaxM2);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && c.qk_norm_full && !c.qk_norm && c.moe.norm_top_k);
  if (c.moe.n_expert == 0) return Corrupt("minimax-m2: expert_count is missing or 0");
  if (c.moe.n_expert_shared != 0 || c.moe.n_leading_dense != 0) {
    return Unsupported("minimax-m2: shared experts and dense layers are not part of it");
  }
  if (c.moe.gating != ExpertGating::kSigmoid) {
    return Unsupported("minimax-m2: only sigmoid expert gating is supported");
  }
  // LoadGqaModel reads exp_probs_b when present; llama.cpp requires it here.
  const WeightLoader loader(file);
  for (int il = 0; il < c.n_layer; ++il) {
    if (!loader.Has(WeightLoader::Blk(il, "exp_probs_b", "bias"))) {
      return Corrupt(fmt::format("minimax-m2: tensor '{}' is missing", WeightLoader::Blk(il, "exp_probs_b", "bias")));
    }
  }
  auto model = LoadGqaModel(file, c);
  if (!model.ok()) return model.status().Annotate("minimax-m2");
  return model;
}

}  // namespace cohort::model
