// llama architecture (Llama 2/3, Mistral; Mixtral when the file has experts): GQA attention
// with NORM RoPE (optional rope_freqs), SiLU-GLU FFN or softmax-routed MoE.
#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {

Result<std::unique_ptr<Model>> LoadLlama(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kLlama);
  COHORT_CHECK(c.rope.type == RopeType::kNorm && !c.qkv_bias && !c.qk_norm);
  auto model = LoadGqaModel(file, c);
  if (!model.ok()) return model.status().Annotate("llama");
  return model;
}

}  // namespace cohort::model
