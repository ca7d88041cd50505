// gpt-oss (general.architecture "gpt-oss", llama.cpp's openai-moe): GQA attention with biases
// on q/k/v/o, a learned attention sink per head, and sliding-window layers (every other one,
// from layer 0) alternating with full attention; NEOX YaRN RoPE; post_attention_norm before
// a MoE FFN in every layer whose router and experts carry biases, that chooses by the raw
// router logits and weighs by a softmax over the chosen ones, with gpt-oss's clamped SwiGLU.
// The experts usually come as MXFP4. A GqaModel whose layers this loader fills.
#include <fmt/format.h>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/gqa_model.h"

namespace cohort::model {
namespace {

// An F32 bias of shape ne (a vector, or one row per expert), borrowed from the mapping.
Result<const float*> Bias(const WeightLoader& loader, const std::string& name, std::vector<int64_t> ne) {
  if (ne.size() == 1) return loader.Vector(name, ne[0]);
  COHORT_ASSIGN_OR_RETURN(TensorView t, loader.Matrix(name, std::move(ne)));
  if (t.type != DType::kF32) {
    return Unsupported(fmt::format("tensor '{}' has type {}; biases must be f32", name, DTypeName(t.type)));
  }
  return reinterpret_cast<const float*>(t.data);
}

Result<GqaLayer> LoadLayer(const WeightLoader& loader, const ModelConfig& c, int il) {
  GqaLayer l;
  const MoeConfig& m = c.moe;
  COHORT_ASSIGN_OR_RETURN(l.attn_norm, loader.Vector(WeightLoader::Blk(il, "attn_norm"), c.n_embd));
  COHORT_ASSIGN_OR_RETURN(l.ffn_norm, loader.Vector(WeightLoader::Blk(il, "post_attention_norm"), c.n_embd));
  COHORT_ASSIGN_OR_RETURN(l.attn, LoadGqaWeights(loader, c, il));  // with the q/k/v biases
  COHORT_ASSIGN_OR_RETURN(l.attn.sinks, loader.Vector(WeightLoader::Blk(il, "attn_sinks"), c.n_head));
  COHORT_ASSIGN_OR_RETURN(l.attn.bo, loader.Vector(WeightLoader::Blk(il, "attn_output", "bias"), c.n_embd));
  COHORT_ASSIGN_OR_RETURN(MoeWeights moe, LoadMoeWeights(loader, c, il));
  COHORT_ASSIGN_OR_RETURN(moe.router_bias, Bias(loader, WeightLoader::Blk(il, "ffn_gate_inp", "bias"), {m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(moe.gate_bias, Bias(loader, WeightLoader::Blk(il, "ffn_gate_exps", "bias"), {m.n_ff_expert, m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(moe.up_bias, Bias(loader, WeightLoader::Blk(il, "ffn_up_exps", "bias"), {m.n_ff_expert, m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(moe.down_bias, Bias(loader, WeightLoader::Blk(il, "ffn_down_exps", "bias"), {c.n_embd, m.n_expert}));
  l.ffn = moe;
  l.sliding = c.is_swa_layer(il);
  return l;
}

}  // namespace

Result<std::unique_ptr<Model>> LoadGptOss(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kGptOss);
  COHORT_CHECK(c.rope.type == RopeType::kNeox && c.qkv_bias && c.attn_sinks);
  if (c.moe.n_expert == 0) return Corrupt("gpt-oss: expert_count is missing or 0");
  if (c.moe.n_leading_dense != 0 || c.moe.n_expert_shared != 0) {
    return Unsupported("gpt-oss: leading dense layers and shared experts are not part of the architecture");
  }
  if (c.head_dim_k != c.head_dim_v) return Unsupported("gpt-oss: key_length != value_length");
  const WeightLoader loader(file);
  auto output = LoadOutputWeights(loader, c);
  if (!output.ok()) return output.status().Annotate("gpt-oss");
  std::vector<GqaLayer> layers(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    auto layer = LoadLayer(loader, c, il);
    if (!layer.ok()) return layer.status().Annotate("gpt-oss");
    layers[il] = *layer;
  }
  return std::unique_ptr<Model>(new GqaModel(c, *output, std::move(layers), nullptr));
}

}  // namespace cohort::model
