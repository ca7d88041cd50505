// ModelConfig::FromGguf: the dimensions from plan::ModelShapeFromGguf (the one reader of those
// keys), and the runtime settings (rope, norm epsilon, expert routing) from `<arch>.*` metadata
// the way llama.cpp's loader reads them (same keys, same defaults, same derived values such as
// the YaRN attention factor); and Validate().
#include "model/config.h"

#include <cmath>
#include <string>
#include <variant>

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "plan/gguf_shape.h"

namespace cohort::model {

const char* ArchName(Arch arch) {
  switch (arch) {
    case Arch::kLlama: return "llama";
    case Arch::kQwen2: return "qwen2";
    case Arch::kQwen3: return "qwen3";
    case Arch::kQwen3Moe: return "qwen3moe";
    case Arch::kDeepseek2: return "deepseek2";
    case Arch::kGlm4Moe: return "glm4moe";
    case Arch::kMinimaxM2: return "minimax-m2";
    case Arch::kQwen35: return "qwen35";
    case Arch::kQwen35Moe: return "qwen35moe";
    case Arch::kGptOss: return "gpt-oss";
  }
  return "?";
}

namespace {

Result<Arch> ParseArch(const std::string& name) {
  for (Arch a : {Arch::kLlama, Arch::kQwen2, Arch::kQwen3, Arch::kQwen3Moe, Arch::kDeepseek2,
                 Arch::kGlm4Moe, Arch::kMinimaxM2, Arch::kQwen35, Arch::kQwen35Moe, Arch::kGptOss}) {
    if (name == ArchName(a)) return a;
  }
  if (name.empty()) return Corrupt("general.architecture is missing");
  return Unsupported(fmt::format("architecture '{}' is not supported (llama, qwen2, qwen3, "
                                 "qwen3moe, deepseek2, glm4moe, minimax-m2, qwen35, qwen35moe, gpt-oss are)",
                                 name));
}

// Typed reads of `<arch>.<key>` that fail with the full key name (the runtime settings; the
// dimension keys are plan::ModelShapeFromGguf's).
class KeyReader {
 public:
  KeyReader(const gguf::File& file, std::string prefix) : file_(file), prefix_(std::move(prefix)) {}

  std::string Key(const char* key) const { return prefix_ + "." + key; }

  Result<int> Int(const char* key, int fallback) const {
    auto v = file_.GetInt(Key(key), fallback);
    if (!v.ok()) return v.status().Annotate("model metadata");
    return CheckedInt(key, *v);
  }
  Result<float> Float(const char* key) const {
    auto v = file_.GetFloat(Key(key));
    if (!v.ok()) return v.status().Annotate("model metadata");
    return static_cast<float>(*v);
  }
  Result<float> Float(const char* key, float fallback) const {
    auto v = file_.GetFloat(Key(key), fallback);
    if (!v.ok()) return v.status().Annotate("model metadata");
    return static_cast<float>(*v);
  }
  Result<bool> Bool(const char* key, bool fallback) const {
    auto v = file_.GetBool(Key(key), fallback);
    if (!v.ok()) return v.status().Annotate("model metadata");
    return *v;
  }
  Result<std::string> String(const char* key, std::string fallback) const {
    auto v = file_.GetString(Key(key), std::move(fallback));
    if (!v.ok()) return v.status().Annotate("model metadata");
    return *v;
  }
  bool Has(const char* key) const { return file_.Find(Key(key)) != nullptr; }

 private:
  Result<int> CheckedInt(const char* key, int64_t v) const {
    if (v < 0 || v > (int64_t{1} << 30)) {
      return Corrupt(fmt::format("model metadata: {} = {} is out of range", Key(key), v));
    }
    return static_cast<int>(v);
  }

  const gguf::File& file_;
  std::string prefix_;
};

// llama.cpp's rope parameters: scaling type/factor, YaRN ext/attn factors (llama_context's
// constructor), beta values and the original context.
Status ParseRope(const KeyReader& keys, Arch arch, ModelConfig& c) {
  RopeConfig& r = c.rope;
  r.type = (arch == Arch::kLlama || arch == Arch::kDeepseek2) ? RopeType::kNorm : RopeType::kNeox;
  COHORT_ASSIGN_OR_RETURN(r.freq_base, keys.Float("rope.freq_base", 10000.0f));
  COHORT_ASSIGN_OR_RETURN(std::string scaling, keys.String("rope.scaling.type", "linear"));
  if (scaling != "none" && scaling != "linear" && scaling != "yarn") {
    return Unsupported(fmt::format("{} = '{}' is not supported (none, linear, yarn are)",
                                   keys.Key("rope.scaling.type"), scaling));
  }
  float factor = 0.0f;
  if (keys.Has("rope.scaling.factor")) {
    COHORT_ASSIGN_OR_RETURN(factor, keys.Float("rope.scaling.factor"));
  } else {
    COHORT_ASSIGN_OR_RETURN(factor, keys.Float("rope.scale_linear", 0.0f));
  }
  if (factor < 0.0f || !std::isfinite(factor)) {
    return Corrupt(fmt::format("{} = {} is invalid", keys.Key("rope.scaling.factor"), factor));
  }
  r.freq_scale = (factor == 0.0f || scaling == "none") ? 1.0f : 1.0f / factor;
  COHORT_ASSIGN_OR_RETURN(r.n_ctx_orig, keys.Int("rope.scaling.original_context_length", c.n_ctx_train));
  COHORT_ASSIGN_OR_RETURN(r.yarn_log_mul, keys.Float("rope.scaling.yarn_log_multiplier", 0.0f));
  // llama.cpp cancels the 0.1 that the DeepSeek converter folds into the multiplier.
  if (arch == Arch::kDeepseek2) r.yarn_log_mul /= 0.1f;
  COHORT_ASSIGN_OR_RETURN(float rope_attn_factor, keys.Float("rope.scaling.attn_factor", 1.0f));
  COHORT_ASSIGN_OR_RETURN(r.beta_fast, keys.Float("rope.scaling.yarn_beta_fast", 32.0f));
  COHORT_ASSIGN_OR_RETURN(r.beta_slow, keys.Float("rope.scaling.yarn_beta_slow", 1.0f));
  r.yarn = scaling == "yarn";
  r.ext_factor = r.yarn ? 1.0f : 0.0f;
  r.attn_factor = 1.0f;
  if (r.ext_factor != 0.0f) {
    auto get_mscale = [](float scale, float mscale) {
      return scale <= 1.0f ? 1.0f : 0.1f * mscale * std::log(scale) + 1.0f;
    };
    const float f = 1.0f / r.freq_scale;
    if (r.yarn_log_mul != 0.0f) {
      const float mscale_all_dims = r.yarn_log_mul;
      const float mscale =
          (arch == Arch::kDeepseek2 && mscale_all_dims != 1.0f) ? mscale_all_dims : 1.0f;
      r.attn_factor = get_mscale(f, mscale) / get_mscale(f, mscale_all_dims);
    } else {
      r.attn_factor = get_mscale(f, 1.0f);
    }
    // The rope kernel multiplies by (1 + 0.1 ln f) itself when ext_factor != 0.
    r.attn_factor *= 1.0f / (1.0f + 0.1f * std::log(f));
  }
  r.attn_factor *= rope_attn_factor;
  return Status::Ok();
}

// The routing settings; the expert counts and widths come from the shape.
Status ParseMoe(const KeyReader& keys, Arch arch, ModelConfig& c) {
  MoeConfig& m = c.moe;
  if (m.n_expert == 0) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(int gating, keys.Int("expert_gating_func", 0));
  // llama.cpp's glm4moe loader takes an absent gating function as sigmoid; its minimax-m2
  // graph has no default (ggml aborts on it), so such a file is refused here.
  if (gating == 0 && arch == Arch::kGlm4Moe) gating = 2;
  if (gating == 0 && arch == Arch::kMinimaxM2) {
    return Corrupt(fmt::format("{} is missing", keys.Key("expert_gating_func")));
  }
  if (gating == 0 || gating == 1) {
    m.gating = ExpertGating::kSoftmax;  // 0: absent (DeepSeek-V2 files), softmax
  } else if (gating == 2) {
    m.gating = ExpertGating::kSigmoid;
  } else {
    return Unsupported(fmt::format("{} = {} is not supported (1 softmax, 2 sigmoid)",
                                   keys.Key("expert_gating_func"), gating));
  }
  COHORT_ASSIGN_OR_RETURN(m.weights_scale, keys.Float("expert_weights_scale", 0.0f));
  // llama.cpp always renormalises the top-k weights of qwen3moe and of llama-arch MoE
  // (Mixtral); deepseek2 follows the file.
  COHORT_ASSIGN_OR_RETURN(m.norm_top_k, keys.Bool("expert_weights_norm", false));
  if (arch == Arch::kQwen3Moe || arch == Arch::kLlama || arch == Arch::kQwen35Moe) m.norm_top_k = true;
  if (arch == Arch::kMinimaxM2) m.norm_top_k = true;  // its graph always renormalises
  COHORT_ASSIGN_OR_RETURN(m.n_group, keys.Int("expert_group_count", 0));
  COHORT_ASSIGN_OR_RETURN(m.n_group_used, keys.Int("expert_group_used_count", 0));
  if (m.n_group == 0) m.n_group = 1;
  if (m.n_group_used == 0) m.n_group_used = m.n_group;
  if (arch == Arch::kGptOss) {
    // llama.cpp's openai-moe graph: softmax over the chosen logits, clamped SwiGLU experts,
    // whatever the file says.
    m.gating = ExpertGating::kSoftmaxWeight;
    m.norm_top_k = false;
    m.activation = ExpertActivation::kSwiGluOai;
  }
  return Status::Ok();
}

// gpt-oss: sliding-window layers (every other one, from layer 0, unless the file gives a
// pattern), attention sinks, biases on every projection.
Status ParseGptOss(const KeyReader& keys, ModelConfig& c) {
  COHORT_ASSIGN_OR_RETURN(c.n_swa, keys.Int("attention.sliding_window", 0));
  if (c.n_swa <= 0) return Corrupt(keys.Key("attention.sliding_window") + " is missing or 0");
  c.swa_pattern = 2;
  if (keys.Has("attention.sliding_window_pattern")) {
    auto pattern = keys.Int("attention.sliding_window_pattern", 2);
    if (!pattern.ok()) {
      return Unsupported(keys.Key("attention.sliding_window_pattern") +
                         ": only a single period is supported, not a per-layer array");
    }
    c.swa_pattern = *pattern;
  }
  COHORT_ASSIGN_OR_RETURN(c.rope_freq_base_swa, keys.Float("rope.freq_base_swa", c.rope.freq_base));
  c.qkv_bias = true;
  c.attn_sinks = true;
  c.attn_out_bias = true;
  return Status::Ok();
}

// Qwen3.5's interleaved M-RoPE (llama.cpp's IMROPE) with text positions: the t, h and w
// position components are all the token's position and the 4th is 0, so a rotated pair whose
// interleaved sector falls in the t/h/w sections rotates as NEOX RoPE does and one in the 4th
// section not at all. Only sections under which every rotated pair is t/h/w (Qwen3.5's
// [11, 11, 10, 0] with 64 rotated dims) are accepted; they are NEOX RoPE exactly.
Status CheckImropeSections(const gguf::File& file, const KeyReader& keys, int n_rot) {
  const gguf::Value* v = file.Find(keys.Key("rope.dimension_sections"));
  if (v == nullptr) return Corrupt(keys.Key("rope.dimension_sections") + " is missing");
  const gguf::Array* a = v->array();
  if (a == nullptr || a->items.size() < 4) {
    return Corrupt(keys.Key("rope.dimension_sections") + " must be an array of 4 integers");
  }
  int sec[4];
  for (int i = 0; i < 4; ++i) {
    const gguf::Value& item = a->items[i];
    if (const int64_t* x = std::get_if<int64_t>(&item.data)) {
      sec[i] = static_cast<int>(*x);
    } else if (const uint64_t* u = std::get_if<uint64_t>(&item.data)) {
      sec[i] = static_cast<int>(*u);
    } else {
      return Corrupt(keys.Key("rope.dimension_sections") + " must hold integers");
    }
    if (sec[i] < 0 || sec[i] > 4096) return Corrupt(keys.Key("rope.dimension_sections") + " is out of range");
  }
  const int total = sec[0] + sec[1] + sec[2] + sec[3];
  if (total <= 0) return Corrupt(keys.Key("rope.dimension_sections") + " sums to 0");
  for (int pair = 0; pair < n_rot / 2; ++pair) {
    const int sector = pair % total;
    const bool thw = (sector % 3 == 0 && sector < 3 * sec[0]) || (sector % 3 == 1 && sector < 3 * sec[1]) ||
                     (sector % 3 == 2 && sector < 3 * sec[2]);
    if (!thw) {
      return Unsupported(fmt::format("{} = [{}, {}, {}, {}] leaves rotated pair {} to the 4th "
                                     "(extra) position section, which is not supported",
                                     keys.Key("rope.dimension_sections"), sec[0], sec[1], sec[2],
                                     sec[3], pair));
    }
  }
  return Status::Ok();
}

// The DeltaNet layout from the shape (plan::ModelShapeFromGguf read the keys).
void SetHybrid(const plan::ModelShape& s, ModelConfig& c) {
  if (!s.is_hybrid()) return;
  c.ssm.conv_kernel = s.ssm_conv_kernel;
  c.ssm.head_dim = s.ssm_head_dim;
  c.ssm.k_heads = s.ssm_k_heads;
  c.ssm.v_heads = s.ssm_v_heads;
  c.ssm.recurrent.resize(s.n_layer);
  for (int l = 0; l < s.n_layer; ++l) c.ssm.recurrent[l] = s.is_recurrent_layer(l) ? 1 : 0;
}

// DeepSeek's YaRN mscale folds into the softmax scale (llama.cpp's deepseek2 graph).
void SetMlaKqScale(ModelConfig& c) {
  const int k_mla = c.mla.qk_nope_dim + c.mla.qk_rope_dim;
  const float ln_inv = std::log(1.0f / c.rope.freq_scale);
  const float attn_factor_org = c.rope.attn_factor * (1.0f + 0.1f * ln_inv);
  const float mscale = attn_factor_org * (1.0f + 0.1f * c.rope.yarn_log_mul * ln_inv);
  c.kq_scale = mscale * mscale / std::sqrt(static_cast<float>(k_mla));
}

// The dimensions, from the planner's reader of the same keys so that the two layers cannot
// read a file differently.
void SetDimensions(const plan::ModelShape& s, ModelConfig& c) {
  c.n_embd = s.n_embd;
  c.n_layer = s.n_layer;
  c.n_ff = s.n_ff;
  c.n_head = s.n_head;
  c.n_head_kv = s.n_head_kv;
  c.head_dim_k = s.head_dim;
  c.head_dim_v = s.head_dim_v;
  c.n_vocab = s.n_vocab;
  c.tied_output = s.tied_embeddings;
  c.moe.n_expert = s.n_expert;
  c.moe.n_expert_used = s.n_expert_used;
  c.moe.n_ff_expert = s.n_ff_expert;
  c.moe.n_expert_shared = s.n_expert_shared;
  c.moe.n_leading_dense = s.n_leading_dense;
  c.mla.q_lora_rank = s.q_lora_rank;
  c.mla.kv_lora_rank = s.kv_lora_rank;
  c.mla.qk_nope_dim = s.qk_nope_dim;
  c.mla.qk_rope_dim = s.qk_rope_dim;
  c.mla.v_head_dim = s.v_head_dim;
}

// glm4moe and minimax-m2: llama.cpp loads their q/k/v biases (GLM-4.5: attention_bias) and
// glm4moe's per-head q/k norms (GLM-4.5 355B has them, Air not) when the file has them, so
// the config records what the first layer holds and the loader then needs it in every layer.
// minimax-m2 always has q/k norms over the whole width.
Status ReadGlmMinimaxFlags(const gguf::File& file, const KeyReader& keys, ModelConfig& c) {
  if (keys.Has("rope.dimension_sections")) {
    return Unsupported(fmt::format("{}: multimodal rope sections (M-RoPE) are not supported",
                                   keys.Key("rope.dimension_sections")));
  }
  c.qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  if (c.arch == Arch::kGlm4Moe) c.qk_norm = file.FindTensor("blk.0.attn_q_norm.weight") != nullptr;
  if (c.arch == Arch::kMinimaxM2) {
    c.qk_norm_full = true;
    // llama.cpp makes its expert tensors feed_forward_length wide (n_ff), though the
    // converter writes the same value as expert_feed_forward_length too.
    if (c.n_ff != c.moe.n_ff_expert) {
      return Corrupt(fmt::format("minimax-m2: {} = {} differs from {} = {}",
                                 keys.Key("feed_forward_length"), c.n_ff,
                                 keys.Key("expert_feed_forward_length"), c.moe.n_ff_expert));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::FromGguf(const gguf::File& file) {
  ModelConfig c;
  COHORT_ASSIGN_OR_RETURN(c.arch, ParseArch(file.architecture()));
  const KeyReader keys(file, ArchName(c.arch));
  {
    auto name = file.GetString("general.name", "");
    c.name = name.ok() ? *name : "";
  }
  COHORT_ASSIGN_OR_RETURN(const plan::ModelShape shape, plan::ModelShapeFromGguf(file));
  SetDimensions(shape, c);
  SetHybrid(shape, c);
  COHORT_ASSIGN_OR_RETURN(c.n_ctx_train, plan::TrainedContextFromGguf(file));
  COHORT_ASSIGN_OR_RETURN(c.rms_eps, keys.Float("attention.layer_norm_rms_epsilon"));
  if (c.arch == Arch::kDeepseek2) {
    c.rope.n_rot = c.mla.qk_rope_dim;  // the shape read rope.dimension_count for MLA
  } else {
    COHORT_ASSIGN_OR_RETURN(c.rope.n_rot, keys.Int("rope.dimension_count", c.head_dim_k));
  }
  COHORT_RETURN_IF_ERROR(ParseRope(keys, c.arch, c));
  COHORT_RETURN_IF_ERROR(ParseMoe(keys, c.arch, c));
  const bool qwen35 = c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe;
  if (qwen35) {
    COHORT_RETURN_IF_ERROR(CheckImropeSections(file, keys, c.rope.n_rot));
    if (!c.ssm.enabled()) return Corrupt(fmt::format("{}: the DeltaNet (ssm.*) keys are missing", ArchName(c.arch)));
  }
  c.qkv_bias = c.arch == Arch::kQwen2;
  c.qk_norm = c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe || qwen35;
  c.n_nextn_layer = shape.n_nextn_layer;
  if (c.arch == Arch::kGlm4Moe || c.arch == Arch::kMinimaxM2) {
    COHORT_RETURN_IF_ERROR(ReadGlmMinimaxFlags(file, keys, c));
  }
  if (c.arch == Arch::kGptOss) COHORT_RETURN_IF_ERROR(ParseGptOss(keys, c));
  {
    COHORT_ASSIGN_OR_RETURN(const int pooling, keys.Int("pooling_type", 0));
    if (pooling > static_cast<int>(Pooling::kRank)) {
      return Corrupt(fmt::format("{} = {} is not a pooling type", keys.Key("pooling_type"), pooling));
    }
    c.pooling = static_cast<Pooling>(pooling);
  }
  c.kq_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
  if (c.arch == Arch::kDeepseek2) SetMlaKqScale(c);
  COHORT_RETURN_IF_ERROR(c.Validate());
  return c;
}

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kNone: return "none";
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
    case Pooling::kRank: return "rank";
  }
  return "?";
}

namespace {

Status Positive(const char* what, int v) {
  if (v <= 0) return Corrupt(fmt::format("model config: {} = {} must be positive", what, v));
  return Status::Ok();
}

}  // namespace

Status ModelConfig::Validate() const {
  COHORT_RETURN_IF_ERROR(Positive("n_embd", n_embd));
  COHORT_RETURN_IF_ERROR(Positive("n_layer", n_layer));
  COHORT_RETURN_IF_ERROR(Positive("n_head", n_head));
  COHORT_RETURN_IF_ERROR(Positive("n_head_kv", n_head_kv));
  COHORT_RETURN_IF_ERROR(Positive("head_dim_k", head_dim_k));
  COHORT_RETURN_IF_ERROR(Positive("head_dim_v", head_dim_v));
  COHORT_RETURN_IF_ERROR(Positive("n_vocab", n_vocab));
  COHORT_RETURN_IF_ERROR(Positive("n_ctx_train", n_ctx_train));
  if (n_head % n_head_kv != 0) {
    return Corrupt(fmt::format("model config: n_head {} is not a multiple of n_head_kv {}",
                               n_head, n_head_kv));
  }
  if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps)) {
    return Corrupt(fmt::format("model config: rms epsilon {} must be positive", rms_eps));
  }
  if (!(rope.freq_base > 0.0f) || !(rope.freq_scale > 0.0f)) {
    return Corrupt("model config: rope freq_base and freq_scale must be positive");
  }
  const int rope_width = arch == Arch::kDeepseek2 ? mla.qk_rope_dim : head_dim_k;
  if (rope.n_rot <= 0 || rope.n_rot % 2 != 0 || rope.n_rot > rope_width) {
    return Corrupt(fmt::format("model config: rope.dimension_count {} must be even and in "
                               "(0, {}]", rope.n_rot, rope_width));
  }
  if (rope.yarn && rope.n_ctx_orig <= 0) {
    return Corrupt("model config: YaRN needs a positive original context length");
  }
  if (moe.n_expert > 0) {
    COHORT_RETURN_IF_ERROR(Positive("expert_used_count", moe.n_expert_used));
    COHORT_RETURN_IF_ERROR(Positive("expert_feed_forward_length", moe.n_ff_expert));
    if (moe.n_expert_used > moe.n_expert) {
      return Corrupt(fmt::format("model config: expert_used_count {} exceeds expert_count {}",
                                 moe.n_expert_used, moe.n_expert));
    }
    if (moe.n_group < 1 || moe.n_expert % moe.n_group != 0 || moe.n_group_used < 1 ||
        moe.n_group_used > moe.n_group) {
      return Corrupt(fmt::format("model config: expert groups {}/{} do not divide {} experts",
                                 moe.n_group_used, moe.n_group, moe.n_expert));
    }
    if (moe.n_group > 1 && moe.n_expert / moe.n_group < 2) {
      return Corrupt("model config: grouped expert selection needs >= 2 experts per group");
    }
    if (moe.n_group > 1 && moe.n_expert_used > moe.n_group_used * (moe.n_expert / moe.n_group)) {
      return Corrupt("model config: expert_used_count exceeds the experts of the used groups");
    }
  }
  if ((arch == Arch::kGlm4Moe || arch == Arch::kMinimaxM2) && moe.n_expert == 0) {
    return Corrupt(fmt::format("model config: {} needs expert_count > 0", ArchName(arch)));
  }
  if (moe.n_leading_dense > n_layer) {
    return Corrupt("model config: leading_dense_block_count exceeds block_count");
  }
  const bool needs_dense = moe.n_expert == 0 || moe.n_leading_dense > 0;
  if (needs_dense) COHORT_RETURN_IF_ERROR(Positive("feed_forward_length", n_ff));
  if (arch == Arch::kDeepseek2) {
    COHORT_RETURN_IF_ERROR(Positive("kv_lora_rank", mla.kv_lora_rank));
    COHORT_RETURN_IF_ERROR(Positive("value_length_mla", mla.v_head_dim));
    COHORT_RETURN_IF_ERROR(Positive("qk_nope_dim", mla.qk_nope_dim));
    if (mla.qk_rope_dim != rope.n_rot) return Corrupt("model config: MLA rope dim != n_rot");
  }
  if (n_swa < 0 || swa_pattern < 0) return Corrupt("model config: negative sliding window");
  if (!(kq_scale > 0.0f) || !std::isfinite(kq_scale)) {
    return Corrupt(fmt::format("model config: kq_scale {} must be positive", kq_scale));
  }
  if (ssm.enabled()) {
    if (static_cast<int>(ssm.recurrent.size()) != n_layer) return Corrupt("model config: recurrent layer list != n_layer");
    COHORT_RETURN_IF_ERROR(Positive("ssm.state_size", ssm.head_dim));
    COHORT_RETURN_IF_ERROR(Positive("ssm.group_count", ssm.k_heads));
    COHORT_RETURN_IF_ERROR(Positive("ssm.time_step_rank", ssm.v_heads));
    if (ssm.conv_kernel < 2 || ssm.conv_kernel > 64) {
      return Corrupt(fmt::format("model config: ssm.conv_kernel {} must be in [2, 64]", ssm.conv_kernel));
    }
    if (ssm.v_heads % ssm.k_heads != 0) {
      return Corrupt(fmt::format("model config: ssm.time_step_rank {} is not a multiple of "
                                 "ssm.group_count {}", ssm.v_heads, ssm.k_heads));
    }
  }
  return Status::Ok();
}

std::string ModelConfig::ToString() const {
  std::string s = fmt::format(
      "arch={} n_embd={} n_layer={} n_head={} n_head_kv={} head_dim_k={} head_dim_v={} n_ff={} "
      "n_vocab={} n_ctx_train={} rms_eps={} kq_scale={} tied={} rope(n_rot={} base={} "
      "freq_scale={} yarn={} ext={} attn_factor={})",
      ArchName(arch), n_embd, n_layer, n_head, n_head_kv, head_dim_k, head_dim_v, n_ff, n_vocab,
      n_ctx_train, rms_eps, kq_scale, tied_output, rope.n_rot, rope.freq_base, rope.freq_scale,
      rope.yarn, rope.ext_factor, rope.attn_factor);
  if (arch == Arch::kGlm4Moe || arch == Arch::kMinimaxM2) {
    s += fmt::format(" qkv_bias={} qk_norm={} qk_norm_full={} nextn_layers={}", qkv_bias, qk_norm,
                     qk_norm_full, n_nextn_layer);
  }
  if (moe.n_expert > 0) {
    s += fmt::format(" moe(n_expert={} used={} n_ff_exp={} shared={} dense_lead={} gating={} "
                     "norm={} scale={} groups={}/{})",
                     moe.n_expert, moe.n_expert_used, moe.n_ff_expert, moe.n_expert_shared,
                     moe.n_leading_dense,
                     moe.gating == ExpertGating::kSigmoid ? "sigmoid"
                     : moe.gating == ExpertGating::kSoftmaxWeight ? "softmax-weight" : "softmax",
                     moe.norm_top_k, moe.weights_scale, moe.n_group_used, moe.n_group);
  }
  if (ssm.enabled()) {
    int n_rec = 0;
    for (uint8_t r : ssm.recurrent) n_rec += r;
    s += fmt::format(" deltanet(layers={} conv={} head_dim={} k_heads={} v_heads={})", n_rec,
                     ssm.conv_kernel, ssm.head_dim, ssm.k_heads, ssm.v_heads);
  }
  if (n_swa > 0) s += fmt::format(" swa(window={} pattern={} base={})", n_swa, swa_pattern, rope_freq_base_swa);
  if (arch == Arch::kDeepseek2) {
    s += fmt::format(" mla(q_lora={} kv_lora={} nope={} rope={} v={})", mla.q_lora_rank,
                     mla.kv_lora_rank, mla.qk_nope_dim, mla.qk_rope_dim, mla.v_head_dim);
  }
  return s;
}

}  // namespace cohort::model
