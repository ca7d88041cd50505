// qwen35 and qwen35moe architectures (Qwen3.5): a hybrid of gated DeltaNet layers
// (delta_net.h; their memory is a per-sequence RecurrentState beside the KV cache) and, every
// full_attention_interval-th layer, gated full attention: the q projection carries a per-head
// output gate beside each head's query ([q_h, gate_h] per head), q and k are RMS-normed per
// head, RoPE is Qwen3.5's interleaved M-RoPE (with text positions the NEOX rotation over the
// first rope.dimension_count dims, see ModelConfig), and the attention output is multiplied by
// sigmoid(gate) before the output projection. Each layer is x += block(attn_norm(x)), then
// x += ffn(post_attention_norm(x)); the FFN is a SiLU-GLU (qwen35) or softmax-routed experts
// with renormalised top-k and a sigmoid-gated shared expert (qwen35moe), llama.cpp's graphs.
#include <algorithm>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/check.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/arch.h"
#include "model/attention_core.h"
#include "model/decoder.h"
#include "model/delta_net.h"
#include "model/gqa_model.h"
#include "model/recurrent_state.h"

namespace cohort::model {
namespace {

struct Qwen35Layer {
  const float* attn_norm = nullptr;  // [n_embd]
  const float* post_norm = nullptr;  // post_attention_norm [n_embd]: the FFN's input norm
  bool recurrent = false;
  GqaWeights attn;                   // full-attention layers: wq is [n_embd] -> [n_head * 2 * hd]
  DeltaNetWeights delta;             // DeltaNet layers
  FfnWeights ffn;
};

struct GatedAttnScratch {
  std::vector<float> qg, q, k, v, attn;  // [n_tokens][...]
  std::vector<float> scores;             // [n_threads][group][ScoresStride(n_ctx)]
  std::vector<float> rope_cache;
};

class Qwen35Model final : public Decoder {
 public:
  Qwen35Model(ModelConfig config, OutputWeights output, std::vector<Qwen35Layer> layers)
      : Decoder(std::move(config), output), layers_(std::move(layers)) {
    const ModelConfig& c = this->config();
    params_.n_embd = c.n_embd;
    params_.n_head = c.n_head;
    params_.n_head_kv = c.n_head_kv;
    params_.head_dim = c.head_dim_k;
    params_.kq_scale = c.kq_scale;
    params_.rms_eps = c.rms_eps;
    params_.rope = MakeRopeParams(c, nullptr);
  }

  Result<std::unique_ptr<KvCache>> NewKvCache(const KvCacheOptions& options) const override {
    const ModelConfig& c = config();
    const HeadRange delta = DeltaHeads();
    if (delta.size() <= 0) {
      return Unsupported(fmt::format("{}: attention heads [{}, {}) of {} take no DeltaNet key head of {}; "
                                     "split the heads over fewer ranks", ArchName(c.arch), shard().heads.begin,
                                     shard().heads.end, c.n_head, c.ssm.k_heads));
    }
    if (delta.size() != c.ssm.k_heads) {
      // A share's output projection reads runs of its value heads' columns.
      const int64_t block = DeltaOutBlock();
      if ((delta.begin * c.ssm.head_dim) % block != 0 || (delta.size() * c.ssm.head_dim) % block != 0) {
        return Unsupported(fmt::format("{}: DeltaNet key heads [{}, {}) of {} columns each do not fall on "
                                       "the {}-wide quant blocks of ssm_out; split the heads over fewer ranks",
                                       ArchName(c.arch), delta.begin, delta.end, c.ssm.head_dim, block));
      }
    }
    KvCacheOptions o = options;
    if (o.n_ctx == 0) o.n_ctx = c.n_ctx_train;
    COHORT_RETURN_IF_ERROR(o.Validate());
    int n_attn = 0, n_rec = 0;
    for (int l = stage_shard().layer_begin; l < stage_shard().layer_end; ++l) {
      (c.ssm.is_recurrent(l) ? n_rec : n_attn) += 1;
    }
    // KV rows for the full-attention layers only (one unused layer when the stage has none).
    auto cache = std::make_unique<KvCache>(o, std::max(n_attn, 1), KvKeyWidth(), KvValueWidth());
    cache->SetSequenceState(std::make_unique<RecurrentState>(
        n_rec, o.n_seq, DeltaNetConvFloats(c.ssm, delta.size()), DeltaNetStateFloats(c.ssm, delta.size())));
    return cache;
  }

 protected:
  // The KV heads the shard's query heads read (a range may split a group, as in GqaAttention).
  int64_t KvKeyWidth() const override {
    const int group = params_.n_head / params_.n_head_kv;
    const int kv_begin = shard().heads.begin / group;
    const int kv_end = (shard().heads.end + group - 1) / group;
    return static_cast<int64_t>(kv_end - kv_begin) * params_.head_dim;
  }
  int64_t KvValueWidth() const override { return KvKeyWidth(); }
  const float* AttnNorm(int layer) const override { return layers_[layer].attn_norm; }
  const float* FfnNorm(int layer) const override { return layers_[layer].post_norm; }
  const FfnWeights& Ffn(int layer) const override { return layers_[layer].ffn; }
  FfnWeights* MutableFfn(int layer) override { return &layers_[layer].ffn; }
  std::vector<TensorView*> MutableAttnInputs(int layer) override {
    Qwen35Layer& l = layers_[layer];
    if (l.recurrent) {
      DeltaNetWeights& d = l.delta;
      return {&d.wqkv, &d.wz, &d.wbeta, &d.walpha, &d.wout};
    }
    return {&l.attn.wq, &l.attn.wk, &l.attn.wv, &l.attn.wo};
  }

  void Attention(const BlockEnv& env, int layer, const float* x, KvCache& cache,
                 float* out) override {
    const ModelConfig& c = config();
    // Index of the layer among the stage's layers of its kind.
    int index = 0;
    for (int l = stage_shard().layer_begin; l < layer; ++l) index += c.ssm.is_recurrent(l) == layers_[layer].recurrent;
    if (layers_[layer].recurrent) {
      auto* state = dynamic_cast<RecurrentState*>(cache.sequence_state());
      COHORT_CHECK(state != nullptr);  // NewKvCache made it
      if (layer == stage_shard().layer_begin && !StageHasAttention()) {
        // No layer here stores KV rows, which is what advances the sequences' lengths: the
        // placeholder layer takes zero rows.
        zero_row_.assign(static_cast<size_t>(KvKeyWidth()), 0.0f);
        for (int t = 0; t < env.n_tokens; ++t) {
          cache.Store(0, env.seq_ids[t], env.positions[t], zero_row_.data(), zero_row_.data());
        }
      }
      DeltaNet(env, layers_[layer].delta, c.ssm, DeltaHeads(), c.rms_eps, index, x, *state, delta_scratch_,
               out);
    } else {
      GatedAttention(env, layers_[layer].attn, index, x, cache, out);
    }
  }

 private:
  HeadRange DeltaHeads() const { return DeltaNetHeadsOf(config(), shard().heads); }
  // The largest quant block of the stage's DeltaNet output projections.
  int64_t DeltaOutBlock() const {
    int64_t block = 1;
    for (int l = stage_shard().layer_begin; l < stage_shard().layer_end; ++l) {
      if (layers_[l].recurrent) block = std::max(block, Traits(layers_[l].delta.wout.type).block_size);
    }
    return block;
  }
  bool StageHasAttention() const {
    for (int l = stage_shard().layer_begin; l < stage_shard().layer_end; ++l) {
      if (!config().ssm.is_recurrent(l)) return true;
    }
    return false;
  }
  void GatedAttention(const BlockEnv& env, const GqaWeights& w, int cache_layer, const float* x,
                      KvCache& cache, float* out);

  std::vector<Qwen35Layer> layers_;
  GqaParams params_;
  GatedAttnScratch attn_scratch_;
  DeltaNetScratch delta_scratch_;
  std::vector<float> zero_row_;
};

void Qwen35Model::GatedAttention(const BlockEnv& env, const GqaWeights& w, int cache_layer,
                                 const float* x, KvCache& cache, float* out) {
  const GqaParams& p = params_;
  GatedAttnScratch& s = attn_scratch_;
  const int n_tokens = env.n_tokens;
  const int64_t hd = p.head_dim;
  const int group = p.n_head / p.n_head_kv;
  // The shard's query heads and the KV heads they read (a range may split a group when
  // tensor-parallel ranks outnumber the KV heads), as GqaAttention takes them.
  const HeadRange heads = shard().heads;
  const int kv_begin = heads.begin / group;
  const int n_q = heads.size(), n_kv = (heads.end + group - 1) / group - kv_begin;
  const int q_offset = heads.begin - kv_begin * group;
  const int64_t q_width = n_q * hd, kv_width = n_kv * hd;
  COHORT_CHECK_EQ(cache.k_width(), kv_width);
  s.qg.resize(static_cast<size_t>(n_tokens) * 2 * q_width);
  s.q.resize(static_cast<size_t>(n_tokens) * q_width);
  s.k.resize(static_cast<size_t>(n_tokens) * kv_width);
  s.v.resize(static_cast<size_t>(n_tokens) * kv_width);
  s.attn.resize(static_cast<size_t>(n_tokens) * q_width);
  s.rope_cache.resize(p.rope.n_rot);
  const KvRotation rot = KvRotationFor(cache.type(), hd, hd);
  const int64_t qg0 = heads.begin * 2 * hd, kv0 = kv_begin * hd;  // [q_h, gate_h] rows per head
  const kernels::MatMulProduct qkv[] = {{w.wq.Rows(qg0, qg0 + 2 * q_width), x, n_tokens, s.qg.data()},
                                        {w.wk.Rows(kv0, kv0 + kv_width), x, n_tokens, s.k.data()},
                                        {w.wv.Rows(kv0, kv0 + kv_width), x, n_tokens, s.v.data()}};
  kernels::MatMulBatch(qkv, env.pool, env.matmul_scratch);
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_q; ++h) {
      float* q = s.q.data() + t * q_width + h * hd;
      std::copy_n(s.qg.data() + (t * n_q + h) * 2 * hd, hd, q);
      kernels::RmsNorm(q, w.q_norm, hd, p.rms_eps, q);
    }
    for (int h = 0; h < n_kv; ++h) {
      float* k = s.k.data() + t * kv_width + h * hd;
      kernels::RmsNorm(k, w.k_norm, hd, p.rms_eps, k);
    }
    kernels::Rope(p.rope, env.positions[t], s.q.data() + t * q_width, n_q, hd, s.rope_cache.data());
    kernels::Rope(p.rope, env.positions[t], s.k.data() + t * kv_width, n_kv, hd, s.rope_cache.data());
    RotateHadamard(s.q.data() + t * q_width, q_width, rot.k);  // a quantized cache's basis
    RotateHadamard(s.k.data() + t * kv_width, kv_width, rot.k);
    RotateHadamard(s.v.data() + t * kv_width, kv_width, rot.v);
    cache.Store(cache_layer, env.seq_ids[t], env.positions[t], s.k.data() + t * kv_width,
                s.v.data() + t * kv_width);
  }
  const int n_threads = env.pool != nullptr ? env.pool->size() : 1;
  const int stride = ScoresStride(cache.n_ctx());
  s.scores.resize(static_cast<size_t>(n_threads) * group * stride);
  RunOnPool(env.pool, [&](int thread, int threads) {
    int64_t begin, end;
    SplitRange(static_cast<int64_t>(n_tokens) * n_kv, thread, threads, &begin, &end);
    float* scores = s.scores.data() + static_cast<size_t>(thread) * group * stride;
    for (int64_t i = begin; i < end; ++i) {
      const int t = static_cast<int>(i / n_kv);
      const int g = static_cast<int>(i % n_kv);
      // The local query heads [h0, h1) that read local KV head g.
      const int h0 = std::max(0, g * group - q_offset);
      const int h1 = std::min(n_q, (g + 1) * group - q_offset);
      const int seq = env.seq_ids[t];
      // Head g starts g * hd elements into rows of the cache's type (whole Q8_0 blocks).
      const int64_t head = cache.ElementsBytes(g * hd);
      const CacheRows k{cache.KRow(cache_layer, seq, 0) + head, cache.k_row_bytes(), cache.type()};
      const CacheRows v{cache.VRow(cache_layer, seq, 0) + head, cache.v_row_bytes(), cache.type()};
      AttendHeads(s.q.data() + t * q_width + h0 * hd, hd, h1 - h0, hd, k, v, hd,
                  env.positions[t] + 1, p.kq_scale, scores,
                  s.attn.data() + t * q_width + h0 * hd, hd, BatchSumOrder(n_tokens));
    }
  });
  RotateHadamard(s.attn.data(), n_tokens * q_width, rot.v);  // back, before the gate (as llama.cpp)
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < n_q; ++h) {
      const float* gate = s.qg.data() + (t * n_q + h) * 2 * hd + hd;
      float* a = s.attn.data() + t * q_width + h * hd;
      for (int64_t i = 0; i < hd; ++i) a[i] *= kernels::Sigmoid(gate[i]);
    }
  }
  kernels::MatMul(ColumnSlice(w.wo, heads.begin * hd, heads.end * hd), s.attn.data(), n_tokens, out, env.pool,
                  env.matmul_scratch);
}

Result<GqaWeights> LoadGatedAttention(const WeightLoader& loader, const ModelConfig& c, int il) {
  GqaWeights w;
  const int64_t hd = c.head_dim_k;
  const int64_t q = c.n_head * hd, kv = c.n_head_kv * hd;
  COHORT_ASSIGN_OR_RETURN(w.wq, loader.Matrix(WeightLoader::Blk(il, "attn_q"), {c.n_embd, 2 * q}));
  COHORT_ASSIGN_OR_RETURN(w.wk, loader.Matrix(WeightLoader::Blk(il, "attn_k"), {c.n_embd, kv}));
  COHORT_ASSIGN_OR_RETURN(w.wv, loader.Matrix(WeightLoader::Blk(il, "attn_v"), {c.n_embd, kv}));
  COHORT_ASSIGN_OR_RETURN(w.wo, loader.Matrix(WeightLoader::Blk(il, "attn_output"), {q, c.n_embd}));
  COHORT_ASSIGN_OR_RETURN(w.q_norm, loader.Vector(WeightLoader::Blk(il, "attn_q_norm"), hd));
  COHORT_ASSIGN_OR_RETURN(w.k_norm, loader.Vector(WeightLoader::Blk(il, "attn_k_norm"), hd));
  return w;
}

// An F32 tensor of exactly shape ne (the conv kernel is 2-D).
Result<const float*> F32Tensor(const WeightLoader& loader, const std::string& name,
                               std::vector<int64_t> ne) {
  COHORT_ASSIGN_OR_RETURN(TensorView v, loader.Table(name, std::move(ne)));
  if (v.type != DType::kF32) {
    return Unsupported(fmt::format("tensor '{}' has type {}; it must be f32", name, DTypeName(v.type)));
  }
  return reinterpret_cast<const float*>(v.data);
}

Result<DeltaNetWeights> LoadDeltaNet(const WeightLoader& loader, const ModelConfig& c, int il) {
  DeltaNetWeights w;
  const HybridConfig& h = c.ssm;
  const int64_t e = c.n_embd;
  if (loader.Has(WeightLoader::Blk(il, "attn_qkv")) == false) {
    return Unsupported(fmt::format("layer {}: DeltaNet layers without a fused attn_qkv are not supported", il));
  }
  COHORT_ASSIGN_OR_RETURN(w.wqkv, loader.Matrix(WeightLoader::Blk(il, "attn_qkv"), {e, h.conv_channels()}));
  COHORT_ASSIGN_OR_RETURN(w.wz, loader.Matrix(WeightLoader::Blk(il, "attn_gate"), {e, h.value_width()}));
  COHORT_ASSIGN_OR_RETURN(w.wbeta, loader.Matrix(WeightLoader::Blk(il, "ssm_beta"), {e, h.v_heads}));
  COHORT_ASSIGN_OR_RETURN(w.walpha, loader.Matrix(WeightLoader::Blk(il, "ssm_alpha"), {e, h.v_heads}));
  COHORT_ASSIGN_OR_RETURN(w.conv, F32Tensor(loader, WeightLoader::Blk(il, "ssm_conv1d"),
                                            {h.conv_kernel, h.conv_channels()}));
  COHORT_ASSIGN_OR_RETURN(w.dt_bias, loader.Vector(WeightLoader::Blk(il, "ssm_dt", "bias"), h.v_heads));
  COHORT_ASSIGN_OR_RETURN(w.a, loader.Vector(fmt::format("blk.{}.ssm_a", il), h.v_heads));
  COHORT_ASSIGN_OR_RETURN(w.norm, loader.Vector(WeightLoader::Blk(il, "ssm_norm"), h.head_dim));
  COHORT_ASSIGN_OR_RETURN(w.wout, loader.Matrix(WeightLoader::Blk(il, "ssm_out"), {h.value_width(), e}));
  return w;
}

Result<std::unique_ptr<Model>> LoadQwen35Model(const gguf::File& file, const ModelConfig& c) {
  if (c.head_dim_k != c.head_dim_v) return Unsupported("key_length != value_length is not supported");
  const WeightLoader loader(file);
  COHORT_ASSIGN_OR_RETURN(OutputWeights output, LoadOutputWeights(loader, c));
  std::vector<Qwen35Layer> layers(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    Qwen35Layer& l = layers[il];
    COHORT_ASSIGN_OR_RETURN(l.attn_norm, loader.Vector(WeightLoader::Blk(il, "attn_norm"), c.n_embd));
    COHORT_ASSIGN_OR_RETURN(l.post_norm, loader.Vector(WeightLoader::Blk(il, "post_attention_norm"), c.n_embd));
    l.recurrent = c.ssm.is_recurrent(il);
    if (l.recurrent) {
      COHORT_ASSIGN_OR_RETURN(l.delta, LoadDeltaNet(loader, c, il));
    } else {
      COHORT_ASSIGN_OR_RETURN(l.attn, LoadGatedAttention(loader, c, il));
    }
    if (c.is_moe_layer(il)) {
      COHORT_ASSIGN_OR_RETURN(MoeWeights moe, LoadMoeWeights(loader, c, il));
      // The shared expert's output is scaled by sigmoid(ffn_gate_inp_shexp · x).
      COHORT_ASSIGN_OR_RETURN(moe.shared_gate, loader.Vector(WeightLoader::Blk(il, "ffn_gate_inp_shexp"), c.n_embd));
      l.ffn = std::move(moe);
    } else {
      COHORT_ASSIGN_OR_RETURN(l.ffn, LoadDenseFfn(loader, c, il, c.n_ff, ""));
    }
  }
  return std::unique_ptr<Model>(new Qwen35Model(c, output, std::move(layers)));
}

}  // namespace

Result<std::unique_ptr<Model>> LoadQwen35(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kQwen35);
  if (c.moe.n_expert > 0) return Unsupported("qwen35: expert layers belong to qwen35moe");
  auto model = LoadQwen35Model(file, c);
  if (!model.ok()) return model.status().Annotate("qwen35");
  return model;
}

Result<std::unique_ptr<Model>> LoadQwen35Moe(const gguf::File& file, const ModelConfig& c) {
  COHORT_CHECK(c.arch == Arch::kQwen35Moe);
  if (c.moe.n_expert == 0) return Corrupt("qwen35moe: expert_count is missing or 0");
  if (c.moe.n_expert_shared != 1 || c.moe.gating != ExpertGating::kSoftmax || c.moe.n_leading_dense != 0) {
    return Unsupported("qwen35moe: only softmax routing in every layer with one shared expert is supported");
  }
  auto model = LoadQwen35Model(file, c);
  if (!model.ok()) return model.status().Annotate("qwen35moe");
  return model;
}

}  // namespace cohort::model
