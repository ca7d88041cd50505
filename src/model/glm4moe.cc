// glm4moe architecture (GLM-4.5 / 4.6 / 4.7, GLM-4.5-Air): GQA attention with NEOX RoPE over
// part of each head (rope.dimension_count < key_length), q/k/v biases and per-head q/k norms
// when the file has them (ModelConfig::FromGguf), the pre-FFN norm stored as
// post_attention_norm, leading dense SiLU-GLU layers, then sigmoid-routed experts with a
// selection bias (exp_probs_b), optional renormalisation and scale and a shared expert. The
// next-token-prediction blocks after the trunk (nextn_predict_layers) are checked when the
// file has them and never run, as llama.cpp skips them in its decoder graph.
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {
namespace {

// An MTP block's own tensors (llama.cpp's create_tensor shapes); its attention and experts
// are a trunk layer's and are left to the mapping unread. A file converted without them
// (convert_hf_to_gguf --no-mtp leaves the key out; a trunk-only file keeps the key but not
// blk.<n>.nextn.eh_proj) loads as llama.cpp loads it: without them.
Status CheckNextnBlock(const WeightLoader& loader, const ModelConfig& c, int il) {
  if (!loader.Has(WeightLoader::Blk(il, "nextn.eh_proj"))) return Status::Ok();
  COHORT_RETURN_IF_ERROR(loader.Matrix(WeightLoader::Blk(il, "nextn.eh_proj"), {2 * int64_t{c.n_embd}, c.n_embd}).status());
  COHORT_RETURN_IF_ERROR(loader.Vector(WeightLoader::Blk(il, "nextn.enorm"), c.n_embd).status());
  COHORT_RETURN_IF_ERROR(loader.Vector(WeightLoader::Blk(il, "nextn.hnorm"), c.n_embd).status());
  return Status::Ok();
}

Result<std::unique_ptr<Model>> Load(const gguf::File& file, const ModelConfig& c) {
  if (c.head_dim_k != c.head_dim_v) return Unsupported("key_length != value_length");
  const WeightLoader loader(file);
  COHORT_ASSIGN_OR_RETURN(OutputWeights output, LoadOutputWeights(loader, c));
  std::vector<GqaLayer> layers(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    GqaLayer& l = layers[il];
    COHORT_ASSIGN_OR_RETURN(l.attn_norm, loader.Vector(WeightLoader::Blk(il, "attn_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.ffn_norm, loader.Vector(WeightLoader::Blk(il, "post_attention_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.attn, LoadGqaWeights(loader, c, il));
    if (c.is_moe_layer(il)) {
      COHORT_ASSIGN_OR_RETURN(MoeWeights moe, LoadMoeWeights(loader, c, il));
      if (moe.selection_bias == nullptr) {
        return Corrupt(fmt::format("tensor '{}' is missing", WeightLoader::Blk(il, "exp_probs_b", "bias")));
      }
      l.ffn = std::move(moe);
    } else {
      COHORT_ASSIGN_OR_RETURN(l.ffn, LoadDenseFfn(loader, c, il, c.n_ff, ""));
    }
  }
  for (int il = c.n_layer; il < c.n_layer + c.n_nextn_layer; ++il) {
    COHORT_RETURN_IF_ERROR(CheckNextnBlock(loader, c, il));
  }
  return std::unique_ptr<Model>(new GqaModel(c, output, std::move(layers), nullptr));
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGlm4Moe(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kGlm4Moe);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && !c.qk_norm_full);
  if (c.moe.n_expert == 0) return Corrupt("glm4moe: expert_count is missing or 0");
  auto model = Load(file, c);
  if (!model.ok()) return model.status().Annotate("glm4moe");
  return model;
}

}  // namespace cohort::model
