// GqaModel; see gqa_model.h.
#include "model/gqa_model.h"

#include "gguf/gguf.h"

namespace cohort::model {

kernels::RopeParams MakeRopeParams(const ModelConfig& c, const float* freq_factors) {
  kernels::RopeParams p;
  p.mode = c.rope.type == RopeType::kNeox ? kernels::RopeMode::kNeox : kernels::RopeMode::kNorm;
  p.n_rot = c.rope.n_rot;
  p.freq_base = c.rope.freq_base;
  p.freq_scale = c.rope.freq_scale;
  p.n_ctx_orig = c.rope.n_ctx_orig;
  p.ext_factor = c.rope.ext_factor;
  p.attn_factor = c.rope.attn_factor;
  p.beta_fast = c.rope.beta_fast;
  p.beta_slow = c.rope.beta_slow;
  p.freq_factors = freq_factors;
  return p;
}

GqaModel::GqaModel(ModelConfig config, OutputWeights output, std::vector<GqaLayer> layers,
                   const float* rope_freqs)
    : Decoder(std::move(config), output), layers_(std::move(layers)) {
  const ModelConfig& c = this->config();
  params_.n_embd = c.n_embd;
  params_.n_head = c.n_head;
  params_.n_head_kv = c.n_head_kv;
  params_.head_dim = c.head_dim_k;
  params_.kq_scale = c.kq_scale;
  params_.rms_eps = c.rms_eps;
  params_.rope = MakeRopeParams(c, rope_freqs);
  params_swa_ = params_;
  params_swa_.n_swa = c.n_swa;
  if (c.rope_freq_base_swa > 0.0f) params_swa_.rope.freq_base = c.rope_freq_base_swa;
}

int64_t GqaModel::KvKeyWidth() const {
  const int group = params_.n_head / params_.n_head_kv;
  const int kv_begin = shard().heads.begin / group;
  const int kv_end = (shard().heads.end + group - 1) / group;
  return static_cast<int64_t>(kv_end - kv_begin) * params_.head_dim;
}

int64_t GqaModel::KvValueWidth() const { return KvKeyWidth(); }

ColumnRange GqaModel::AttnOutputColumns() const {
  return {static_cast<int64_t>(shard().heads.begin) * params_.head_dim,
          static_cast<int64_t>(shard().heads.end) * params_.head_dim};
}

void GqaModel::Attention(const BlockEnv& env, int layer, const float* x, KvCache& cache,
                         float* out) {
  GqaAttention(env, layers_[layer].attn, layers_[layer].sliding ? params_swa_ : params_, shard().heads,
               CacheLayer(layer), x, cache, scratch_, out);
}

Status GqaModel::CopyAttentionRows(int layer, OwnedSlices& owned) {
  GqaWeights& w = layers_[layer].attn;
  const int group = params_.n_head / params_.n_head_kv;
  const int64_t hd = params_.head_dim;
  const int64_t q0 = shard().heads.begin * hd, q1 = shard().heads.end * hd;
  const int64_t kv0 = shard().heads.begin / group * hd;
  const int64_t kv1 = (shard().heads.end + group - 1) / group * hd;
  COHORT_RETURN_IF_ERROR(owned.ShareRows(&w.wq, q0, q1));
  COHORT_RETURN_IF_ERROR(owned.ShareRows(&w.wk, kv0, kv1));
  return owned.ShareRows(&w.wv, kv0, kv1);
}

Result<std::unique_ptr<Model>> LoadGqaModel(const gguf::File& file, const ModelConfig& c) {
  if (c.head_dim_k != c.head_dim_v) {
    return Unsupported("GQA models with key_length != value_length are not supported");
  }
  const WeightLoader loader(file);
  COHORT_ASSIGN_OR_RETURN(OutputWeights output, LoadOutputWeights(loader, c));
  COHORT_ASSIGN_OR_RETURN(const float* rope_freqs,
                          loader.OptionalVector("rope_freqs.weight", c.rope.n_rot / 2));
  std::vector<GqaLayer> layers(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    GqaLayer& l = layers[il];
    COHORT_ASSIGN_OR_RETURN(l.attn_norm, loader.Vector(WeightLoader::Blk(il, "attn_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.ffn_norm, loader.Vector(WeightLoader::Blk(il, "ffn_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.attn, LoadGqaWeights(loader, c, il));
    if (c.is_moe_layer(il)) {
      COHORT_ASSIGN_OR_RETURN(l.ffn, LoadMoeWeights(loader, c, il));
    } else {
      COHORT_ASSIGN_OR_RETURN(l.ffn, LoadDenseFfn(loader, c, il, c.n_ff, ""));
    }
  }
  return std::unique_ptr<Model>(new GqaModel(c, output, std::move(layers), rope_freqs));
}

}  // namespace cohort::model
