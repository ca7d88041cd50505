// deepseek2 architecture (DeepSeek-V2/V3, Kimi-K2): MLA attention (absorbed form, latent KV
// cache) with NORM RoPE on the rope part, a few leading dense FFN layers, then MoE layers with
// softmax or sigmoid gating, selection bias, grouped selection and shared experts. kq_scale
// carries the YaRN mscale (see ModelConfig::FromGguf).
#include <vector>

#include "gguf/gguf.h"
#include "model/arch.h"
#include "model/decoder.h"
#include "model/gqa_model.h"
#include "model/mla_attention.h"

namespace cohort::model {
namespace {

struct Deepseek2Layer {
  const float* attn_norm = nullptr;  // [n_embd]
  MlaWeights attn;
  const float* ffn_norm = nullptr;   // [n_embd]
  FfnWeights ffn;
};

class Deepseek2Model final : public Decoder {
 public:
  Deepseek2Model(ModelConfig config, OutputWeights output, std::vector<Deepseek2Layer> layers)
      : Decoder(std::move(config), output), layers_(std::move(layers)) {
    const ModelConfig& c = this->config();
    params_.n_embd = c.n_embd;
    params_.n_head = c.n_head;
    params_.q_lora_rank = c.mla.q_lora_rank;
    params_.kv_lora_rank = c.mla.kv_lora_rank;
    params_.qk_nope_dim = c.mla.qk_nope_dim;
    params_.qk_rope_dim = c.mla.qk_rope_dim;
    params_.v_head_dim = c.mla.v_head_dim;
    params_.kq_scale = c.kq_scale;
    params_.rms_eps = c.rms_eps;
    params_.rope = MakeRopeParams(c, nullptr);
  }

 protected:
  // One latent row per position, shared by all heads; values are its first kv_lora floats.
  int64_t KvKeyWidth() const override { return params_.kv_lora_rank + params_.qk_rope_dim; }
  int64_t KvValueWidth() const override { return 0; }
  const float* AttnNorm(int layer) const override { return layers_[layer].attn_norm; }
  const float* FfnNorm(int layer) const override { return layers_[layer].ffn_norm; }
  void Attention(const BlockEnv& env, int layer, const float* x, KvCache& cache,
                 float* out) override {
    MlaAttention(env, layers_[layer].attn, params_, shard().heads, CacheLayer(layer), x, cache,
                 scratch_, out);
  }
  const FfnWeights& Ffn(int layer) const override { return layers_[layer].ffn; }
  TensorView* MutableAttnOutput(int layer) override { return &layers_[layer].attn.wo; }
  ColumnRange AttnOutputColumns() const override {
    return {static_cast<int64_t>(shard().heads.begin) * params_.v_head_dim,
            static_cast<int64_t>(shard().heads.end) * params_.v_head_dim};
  }
  FfnWeights* MutableFfn(int layer) override { return &layers_[layer].ffn; }

 private:
  std::vector<Deepseek2Layer> layers_;
  MlaParams params_;
  MlaScratch scratch_;
};

Result<MlaWeights> LoadMla(const WeightLoader& loader, const ModelConfig& c, int il) {
  const MlaConfig& m = c.mla;
  const int64_t dk = m.qk_nope_dim + m.qk_rope_dim;
  const int64_t n_head = c.n_head;
  MlaWeights w;
  if (m.q_lora_rank > 0) {
    COHORT_ASSIGN_OR_RETURN(w.q_a, loader.Matrix(WeightLoader::Blk(il, "attn_q_a"), {c.n_embd, m.q_lora_rank}));
    COHORT_ASSIGN_OR_RETURN(w.q_a_norm, loader.Vector(WeightLoader::Blk(il, "attn_q_a_norm"), m.q_lora_rank));
    COHORT_ASSIGN_OR_RETURN(w.q_b, loader.Matrix(WeightLoader::Blk(il, "attn_q_b"), {m.q_lora_rank, n_head * dk}));
  } else {
    COHORT_ASSIGN_OR_RETURN(w.wq, loader.Matrix(WeightLoader::Blk(il, "attn_q"), {c.n_embd, n_head * dk}));
  }
  COHORT_ASSIGN_OR_RETURN(w.kv_a_mqa, loader.Matrix(WeightLoader::Blk(il, "attn_kv_a_mqa"),
                                                    {c.n_embd, m.kv_lora_rank + m.qk_rope_dim}));
  COHORT_ASSIGN_OR_RETURN(w.kv_a_norm, loader.Vector(WeightLoader::Blk(il, "attn_kv_a_norm"), m.kv_lora_rank));
  COHORT_ASSIGN_OR_RETURN(w.k_b, loader.Matrix(WeightLoader::Blk(il, "attn_k_b"), {m.qk_nope_dim, m.kv_lora_rank, n_head}));
  COHORT_ASSIGN_OR_RETURN(w.v_b, loader.Matrix(WeightLoader::Blk(il, "attn_v_b"), {m.kv_lora_rank, m.v_head_dim, n_head}));
  COHORT_ASSIGN_OR_RETURN(w.wo, loader.Matrix(WeightLoader::Blk(il, "attn_output"), {n_head * m.v_head_dim, c.n_embd}));
  return w;
}

}  // namespace

Result<std::unique_ptr<Model>> LoadDeepseek2(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kDeepseek2);
  const WeightLoader loader(file);
  auto annotate = [](const Status& s) { return s.Annotate("deepseek2"); };
  auto output = LoadOutputWeights(loader, c);
  if (!output.ok()) return annotate(output.status());
  std::vector<Deepseek2Layer> layers(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    Deepseek2Layer& l = layers[il];
    COHORT_ASSIGN_OR_RETURN(l.attn_norm, loader.Vector(WeightLoader::Blk(il, "attn_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.ffn_norm, loader.Vector(WeightLoader::Blk(il, "ffn_norm"), c.n_embd));
    auto attn = LoadMla(loader, c, il);
    if (!attn.ok()) return annotate(attn.status());
    l.attn = *attn;
    if (c.is_moe_layer(il)) {
      auto moe = LoadMoeWeights(loader, c, il);
      if (!moe.ok()) return annotate(moe.status());
      l.ffn = std::move(*moe);
    } else {
      auto dense = LoadDenseFfn(loader, c, il, c.n_ff, "");
      if (!dense.ok()) return annotate(dense.status());
      l.ffn = *dense;
    }
  }
  return std::unique_ptr<Model>(new Deepseek2Model(c, *output, std::move(layers)));
}

}  // namespace cohort::model
