// Random-weight GGUF writer for `cohort synth`. Tensor names, shapes and metadata keys are
// those llama.cpp's converter writes for each architecture; the per-tensor quantization
// follows llama-quantize's default mixtures (the output matrix at Q6_K, Q4_K_M's Q6_K
// attn_v/ffn_down on the "more bits" layers), so files behave like the published ones.
#include "model/synth.h"

#include <cmath>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "gguf/imatrix.h"
#include "gguf/writer.h"
#include "kernels/quant.h"
#include "plan/model_shape.h"
#include "model/synth_shapes.h"

namespace cohort::model {
namespace {

struct TypeChoice {
  DType base;               // most matrices
  DType output;             // the LM head (token_embd when tied)
  bool k_mix = false;       // Q4_K_M: attn_v / ffn_down at Q6_K on the "more bits" layers
  uint32_t file_type = 0;   // general.file_type (llama_ftype)
  DType experts = DType::kF32;  // routed experts: `base`, or MXFP4 for --type mxfp4
  DType embedding = DType::kF32;  // token_embd when untied: `base`, or Q4_K for the ternary types
  // llama-quantize's 3-bit i-quant mixtures: token_embd (untied) and attn_output, and attn_v
  // at Q4_K where 4 or more query heads share a KV head. ChooseTypes sets them.
  DType attn_output = DType::kF32;
  bool attn_v_q4_k_gqa4 = false;
};

// llama_tensor_get_type for IQ3_XXS (as with an importance matrix, which llama-quantize
// requires for it; its attn_q/attn_k at IQ2_S are left at IQ3_XXS) and IQ3_S.
void SetIq3Mixture(TypeChoice* c) {
  if (c->base != DType::kIQ3_XXS && c->base != DType::kIQ3_S) return;
  c->attn_v_q4_k_gqa4 = true;
  if (c->base == DType::kIQ3_XXS) {
    c->output = DType::kQ5_K;
    c->embedding = c->attn_output = DType::kIQ3_S;
  }
}

Result<TypeChoice> ChooseTypes(const std::string& name, bool pure) {
  struct Row {
    std::string_view name;
    DType base;
    uint32_t ftype;
  };
  static constexpr Row kRows[] = {
      {"f32", DType::kF32, 0},   {"f16", DType::kF16, 1},    {"bf16", DType::kBF16, 32},
      {"q4_0", DType::kQ4_0, 2}, {"q4_1", DType::kQ4_1, 3},  {"q8_0", DType::kQ8_0, 7},
      {"q5_0", DType::kQ5_0, 8}, {"q5_1", DType::kQ5_1, 9},  {"q2_k", DType::kQ2_K, 10},
      {"q3_k", DType::kQ3_K, 12}, {"q4_k", DType::kQ4_K, 14}, {"q4_k_m", DType::kQ4_K, 15},
      {"q5_k", DType::kQ5_K, 16}, {"q6_k", DType::kQ6_K, 18},
      {"iq3_xxs", DType::kIQ3_XXS, 23}, {"iq3_s", DType::kIQ3_S, 26},
      {"iq2_xxs", DType::kIQ2_XXS, 19}, {"iq4_nl", DType::kIQ4_NL, 25}, {"iq4_xs", DType::kIQ4_XS, 30},
      // llama_ftype 20 (MOSTLY_IQ2_XS) has IQ2_XS matrices; 29 (MOSTLY_IQ2_M) is the one whose
      // matrices are IQ2_S (llama.cpp's MOSTLY_IQ2_S, 28, has IQ2_XS ones).
      {"iq2_xs", DType::kIQ2_XS, 20}, {"iq2_s", DType::kIQ2_S, 29},
      {"tq1_0", DType::kTQ1_0, 36}, {"tq2_0", DType::kTQ2_0, 37},
      {"iq1_s", DType::kIQ1_S, 24}, {"iq1_m", DType::kIQ1_M, 31},
      {"mxfp4", DType::kF32, 38},  // MOSTLY_MXFP4_MOE: MXFP4 routed experts, the rest F32
      // Every matrix MXFP4 (llama-quantize --pure MXFP4_MOE's file; with --pure the head too).
      {"mxfp4_all", DType::kMXFP4, 38},
  };
  for (const Row& r : kRows) {
    if (r.name != name) continue;
    TypeChoice c{r.base, r.base, name == "q4_k_m" && !pure, r.ftype, r.base};
    if (name == "mxfp4") c.experts = DType::kMXFP4;
    // llama-quantize keeps the LM head at Q6_K for the quantized mixtures (Q8_0 stays Q8_0).
    const bool plain = !Traits(r.base).quantized;
    if (!pure && !plain && r.base != DType::kQ8_0 && r.base != DType::kQ6_K) c.output = DType::kQ6_K;
    // ... but at Q5_K for the 2-bit i-quants.
    if (!pure && r.base == DType::kIQ2_XXS) c.output = DType::kQ5_K;
    if (!pure && (r.base == DType::kIQ1_S || r.base == DType::kIQ1_M)) c.output = DType::kQ5_K;
    if (!pure && (r.base == DType::kIQ2_XS || r.base == DType::kIQ2_S)) c.output = DType::kQ5_K;
    // An untied token_embd of the ternary types is Q4_K (a tied one is the LM head: Q6_K).
    c.embedding = r.base;
    if (!pure && (r.base == DType::kTQ1_0 || r.base == DType::kTQ2_0)) c.embedding = DType::kQ4_K;
    c.attn_output = c.base;
    if (!pure) SetIq3Mixture(&c);
    return c;
  }
  std::string names;
  for (const Row& r : kRows) {
    if (!names.empty()) names += ' ';
    names += r.name;
  }
  return InvalidArgument("unknown --type '" + name + "' (" + names + ")");
}

// llama-quantize's rule for which layers of a Q4_K_M model get more bits.
bool UseMoreBits(int layer, int n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// A type the row length allows: K-quants need multiples of 256, the rest of 32.
DType Fit(DType type, int64_t ne0) {
  if (ne0 % Traits(type).block_size == 0) return type;
  // llama-quantize's fallback for the ternary types.
  if ((type == DType::kTQ1_0 || type == DType::kTQ2_0) && ne0 % 32 == 0) return DType::kQ4_0;
  // llama-quantize's fallback for the 3-bit i-quants.
  if ((type == DType::kIQ3_XXS || type == DType::kIQ3_S) && ne0 % 32 == 0) return DType::kIQ4_NL;
  if (ne0 % 32 == 0) return DType::kQ8_0;
  return DType::kF16;
}

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t HashName(std::string_view s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 1099511628211ull;
  return h;
}

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;
  DType type;
  float std_dev;     // of the random values
  float mean = 0.0f; // norm gains are 1 + noise
};

// Fills a tensor's bytes: approximately normal values (sum of four uniforms), each row
// drawn from its own stream so rows can be made in parallel and the file is reproducible.
// importance: the tensor's importance matrix entry (ne0 per expert), or null.
Status FillData(const TensorSpec& t, uint64_t seed, const std::vector<float>* importance, ThreadPool* pool,
                std::span<uint8_t> data) {
  int64_t rows = 1;
  for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
  const int64_t n = t.ne[0];
  const int64_t row_bytes = RowBytes(t.type, n);
  COHORT_CHECK_EQ(static_cast<int64_t>(data.size()), rows * row_bytes);
  const uint64_t base = HashName(t.name, seed);
  // sqrt(3): the sum of 4 uniforms on [-1, 1) has variance 4/3.
  const float scale = t.std_dev * std::sqrt(3.0f) / 2.0f;
  pool->ParallelFor(rows, [&](int64_t begin, int64_t end) {
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t r = begin; r < end; ++r) {
      uint64_t state = base ^ (static_cast<uint64_t>(r) * 0x632be59bd9b4e019ull);
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t bits = SplitMix(&state);
        float sum = 0.0f;
        for (int k = 0; k < 4; ++k) {
          sum += static_cast<float>((bits >> (16 * k)) & 0xffffu) / 32768.0f - 1.0f;
        }
        values[static_cast<size_t>(i)] = t.mean + scale * sum;
      }
      if (importance != nullptr) {
        const int64_t expert = t.ne.size() > 2 ? r / t.ne[1] : 0;
        kernels::QuantizeRowWeighted(t.type, values.data(), data.data() + r * row_bytes, n,
                                     importance->data() + expert * n);
      } else {
        kernels::QuantizeRow(t.type, values.data(), data.data() + r * row_bytes, n);
      }
    }
  });
  return Status::Ok();
}

// qwen3 and qwen3moe normalise q and k per head (as model::ModelConfig::qk_norm says).
bool HasQkNorm(const SynthModel& m) {
  return m.arch == "qwen3" || m.arch == "qwen3moe" || m.arch == "qwen35" || m.arch == "qwen35moe";
}

// gpt-oss: biases on every projection, the router and the experts; attention sinks; the norm
// before the FFN is named post_attention_norm.
bool IsGptOss(const SynthModel& m) { return m.arch == "gpt-oss"; }

std::vector<TensorSpec> Tensors(const plan::ModelShape& s, const SynthModel& model,
                                const TypeChoice& types, int n_vocab) {
  std::vector<TensorSpec> out;
  auto matrix = [&](std::string name, int64_t n_in, int64_t n_out, DType type, float std_dev,
                    int64_t n_mat = 0) {
    std::vector<int64_t> ne = {n_in, n_out};
    if (n_mat > 0) ne.push_back(n_mat);
    out.push_back({std::move(name), ne, Fit(type, n_in), std_dev});
  };
  auto vec = [&](std::string name, int64_t n, float mean, float std_dev) {
    out.push_back({std::move(name), {n}, DType::kF32, std_dev, mean});
  };
  const int64_t e = s.n_embd;
  const float emb_std = 0.02f;
  matrix("token_embd.weight", e, n_vocab, s.tied_embeddings ? types.output : types.embedding, emb_std);
  vec("output_norm.weight", e, 1.0f, 0.02f);
  if (!s.tied_embeddings) matrix("output.weight", e, n_vocab, types.output, emb_std);

  const bool glm = model.arch == "glm4moe", minimax = model.arch == "minimax-m2";
  // glm4moe's MTP blocks follow the trunk: a MoE layer plus the nextn tensors.
  for (int l = 0; l < s.n_layer + s.n_nextn_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const DType more = types.k_mix && UseMoreBits(l, s.n_layer) ? DType::kQ6_K : types.base;
    const float w = 1.0f / std::sqrt(static_cast<float>(e));
    vec(p + "attn_norm.weight", e, 1.0f, 0.02f);
    // GLM's and gpt-oss's converters (and Qwen3.5's) name the pre-FFN norm post_attention_norm.
    vec(p + (glm || s.is_hybrid() || IsGptOss(model) ? "post_attention_norm.weight" : "ffn_norm.weight"), e, 1.0f, 0.02f);
    if (l >= s.n_layer) {
      matrix(p + "nextn.eh_proj.weight", 2 * e, e, types.base, w);
      vec(p + "nextn.enorm.weight", e, 1.0f, 0.02f);
      vec(p + "nextn.hnorm.weight", e, 1.0f, 0.02f);
      vec(p + "nextn.shared_head_norm.weight", e, 1.0f, 0.02f);
    }
    if (s.is_hybrid() && s.is_recurrent_layer(l)) {
      // Gated DeltaNet, the tensors llama.cpp's converter writes: ssm_a is -exp(A_log) < 0,
      // ssm_dt the softplus bias; the small vectors and the conv kernel stay F32.
      const int64_t kw = static_cast<int64_t>(s.ssm_k_heads) * s.ssm_head_dim;
      const int64_t vw = static_cast<int64_t>(s.ssm_v_heads) * s.ssm_head_dim;
      matrix(p + "attn_qkv.weight", e, 2 * kw + vw, types.base, w);
      matrix(p + "attn_gate.weight", e, vw, types.base, w);
      matrix(p + "ssm_beta.weight", e, s.ssm_v_heads, types.base, w);
      matrix(p + "ssm_alpha.weight", e, s.ssm_v_heads, types.base, w);
      out.push_back({p + "ssm_conv1d.weight", {s.ssm_conv_kernel, 2 * kw + vw}, DType::kF32, 0.3f});
      vec(p + "ssm_dt.bias", s.ssm_v_heads, 0.5f, 0.3f);
      vec(p + "ssm_a", s.ssm_v_heads, -1.0f, 0.3f);
      vec(p + "ssm_norm.weight", s.ssm_head_dim, 1.0f, 0.02f);
      matrix(p + "ssm_out.weight", vw, e, more, 1.0f / std::sqrt(static_cast<float>(vw)));
    } else if (s.is_mla()) {
      const int64_t qk = s.qk_nope_dim + s.qk_rope_dim;
      matrix(p + "attn_q_a.weight", e, s.q_lora_rank, types.base, w);
      vec(p + "attn_q_a_norm.weight", s.q_lora_rank, 1.0f, 0.02f);
      matrix(p + "attn_q_b.weight", s.q_lora_rank, s.n_head * qk, types.base, w);
      matrix(p + "attn_kv_a_mqa.weight", e, s.kv_lora_rank + s.qk_rope_dim, types.base, w);
      vec(p + "attn_kv_a_norm.weight", s.kv_lora_rank, 1.0f, 0.02f);
      matrix(p + "attn_k_b.weight", s.qk_nope_dim, s.kv_lora_rank, more, w, s.n_head);
      matrix(p + "attn_v_b.weight", s.kv_lora_rank, s.v_head_dim, more, w, s.n_head);
      matrix(p + "attn_output.weight", s.n_head * s.v_head_dim, e, types.attn_output, w);
    } else {
      const int64_t q = static_cast<int64_t>(s.n_head) * s.head_dim;
      const int64_t kv = static_cast<int64_t>(s.n_head_kv) * s.head_dim;
      // A hybrid model's full-attention q carries a per-head output gate: [q_h, gate_h].
      matrix(p + "attn_q.weight", e, s.is_hybrid() ? 2 * q : q, types.base, w);
      matrix(p + "attn_k.weight", e, kv, types.base, w);
      const bool v_q4_k = types.attn_v_q4_k_gqa4 && s.n_head >= 4 * s.n_head_kv;
      matrix(p + "attn_v.weight", e, kv, v_q4_k ? DType::kQ4_K : more, w);
      matrix(p + "attn_output.weight", q, e, types.attn_output, w);
      if (HasQkNorm(model)) {
        vec(p + "attn_q_norm.weight", s.head_dim, 1.0f, 0.02f);
        vec(p + "attn_k_norm.weight", s.head_dim, 1.0f, 0.02f);
      }
      if (glm) {  // GLM-4.5's attention_bias
        vec(p + "attn_q.bias", q, 0.0f, 0.02f);
        vec(p + "attn_k.bias", kv, 0.0f, 0.02f);
        vec(p + "attn_v.bias", kv, 0.0f, 0.02f);
      }
      if (minimax) {  // over all heads at once
        vec(p + "attn_q_norm.weight", q, 1.0f, 0.02f);
        vec(p + "attn_k_norm.weight", kv, 1.0f, 0.02f);
      }
      if (IsGptOss(model)) {
        vec(p + "attn_q.bias", q, 0.0f, 0.02f);
        vec(p + "attn_k.bias", kv, 0.0f, 0.02f);
        vec(p + "attn_v.bias", kv, 0.0f, 0.02f);
        vec(p + "attn_output.bias", e, 0.0f, 0.02f);
        vec(p + "attn_sinks.weight", s.n_head, 0.0f, 1.0f);
      }
    }
    const bool moe = s.n_expert > 0 && l >= s.n_leading_dense;
    if (!moe) {
      matrix(p + "ffn_gate.weight", e, s.n_ff, types.base, w);
      matrix(p + "ffn_up.weight", e, s.n_ff, types.base, w);
      matrix(p + "ffn_down.weight", s.n_ff, e, more, 1.0f / std::sqrt(static_cast<float>(s.n_ff)));
      continue;
    }
    // The router stays F32, as llama-quantize leaves it.
    out.push_back({p + "ffn_gate_inp.weight", {e, s.n_expert}, DType::kF32, w});
    if (s.is_mla() || glm || minimax) vec(p + "exp_probs_b.bias", s.n_expert, 0.0f, 0.01f);
    const float wd = 1.0f / std::sqrt(static_cast<float>(s.n_ff_expert));
    const DType exps = types.experts, exps_down = types.experts == types.base ? more : types.experts;
    matrix(p + "ffn_gate_exps.weight", e, s.n_ff_expert, exps, w, s.n_expert);
    matrix(p + "ffn_up_exps.weight", e, s.n_ff_expert, exps, w, s.n_expert);
    matrix(p + "ffn_down_exps.weight", s.n_ff_expert, e, exps_down, wd, s.n_expert);
    if (IsGptOss(model)) {
      vec(p + "ffn_gate_inp.bias", s.n_expert, 0.0f, 0.1f);
      out.push_back({p + "ffn_gate_exps.bias", {s.n_ff_expert, s.n_expert}, DType::kF32, 0.02f});
      out.push_back({p + "ffn_up_exps.bias", {s.n_ff_expert, s.n_expert}, DType::kF32, 0.02f});
      out.push_back({p + "ffn_down_exps.bias", {e, s.n_expert}, DType::kF32, 0.02f});
    }
    if (s.n_expert_shared > 0) {
      const int64_t f = static_cast<int64_t>(s.n_ff_expert) * s.n_expert_shared;
      matrix(p + "ffn_gate_shexp.weight", e, f, types.base, w);
      matrix(p + "ffn_up_shexp.weight", e, f, types.base, w);
      matrix(p + "ffn_down_shexp.weight", f, e, more, wd);
      if (s.is_hybrid()) vec(p + "ffn_gate_inp_shexp.weight", e, 0.0f, w);
    }
  }
  return out;
}

void SetHyperparameters(const plan::ModelShape& s, const SynthModel& model, int n_vocab,
                        gguf::Writer* w) {
  const std::string a = model.arch + ".";
  w->SetUint32(a + "context_length", static_cast<uint32_t>(model.n_ctx));
  w->SetUint32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w->SetUint32(a + "block_count", static_cast<uint32_t>(s.n_layer + s.n_nextn_layer));
  w->SetUint32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w->SetUint32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  // MLA: llama.cpp's converter stores one KV head (MQA over the latent) whatever the model's
  // config.json says.
  w->SetUint32(a + "attention.head_count_kv", static_cast<uint32_t>(s.is_mla() ? 1 : s.n_head_kv));
  w->SetFloat32(a + "attention.layer_norm_rms_epsilon", model.rms_eps);
  w->SetFloat32(a + "rope.freq_base", model.rope_base);
  w->SetUint32(a + "vocab_size", static_cast<uint32_t>(n_vocab));
  if (s.is_mla()) {
    w->SetUint32(a + "attention.q_lora_rank", static_cast<uint32_t>(s.q_lora_rank));
    w->SetUint32(a + "attention.kv_lora_rank", static_cast<uint32_t>(s.kv_lora_rank));
    // MLA in llama.cpp's absorbed form: one "KV head" holding the latent and the rope part.
    w->SetUint32(a + "attention.key_length", static_cast<uint32_t>(s.kv_lora_rank + s.qk_rope_dim));
    w->SetUint32(a + "attention.value_length", static_cast<uint32_t>(s.kv_lora_rank));
    w->SetUint32(a + "attention.key_length_mla", static_cast<uint32_t>(s.qk_nope_dim + s.qk_rope_dim));
    w->SetUint32(a + "attention.value_length_mla", static_cast<uint32_t>(s.v_head_dim));
    w->SetUint32(a + "rope.dimension_count", static_cast<uint32_t>(s.qk_rope_dim));
    w->SetUint32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_leading_dense));
    w->SetUint32(a + "expert_shared_count", static_cast<uint32_t>(s.n_expert_shared));
    w->SetFloat32(a + "expert_weights_scale", 2.5f);
    w->SetBool(a + "expert_weights_norm", true);
    w->SetUint32(a + "expert_gating_func", 2);  // sigmoid
    w->SetUint32(a + "expert_group_count", static_cast<uint32_t>(model.n_group));
    w->SetUint32(a + "expert_group_used_count", static_cast<uint32_t>(model.n_group_used));
    w->SetString(a + "rope.scaling.type", "yarn");
    w->SetFloat32(a + "rope.scaling.factor", model.yarn_factor);
    w->SetUint32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(model.yarn_orig_ctx));
    w->SetFloat32(a + "rope.scaling.yarn_log_multiplier", 0.1f);
  } else {
    w->SetUint32(a + "attention.key_length", static_cast<uint32_t>(s.head_dim));
    w->SetUint32(a + "attention.value_length", static_cast<uint32_t>(s.head_dim));
    // Qwen3.5 rotates a quarter of each head (partial_rotary_factor 0.25).
    w->SetUint32(a + "rope.dimension_count",
                 static_cast<uint32_t>(model.rope_dim > 0 ? model.rope_dim : s.is_hybrid() ? s.head_dim / 4 : s.head_dim));
  }
  if (s.is_hybrid()) {
    w->SetUint32(a + "ssm.conv_kernel", static_cast<uint32_t>(s.ssm_conv_kernel));
    w->SetUint32(a + "ssm.state_size", static_cast<uint32_t>(s.ssm_head_dim));
    w->SetUint32(a + "ssm.group_count", static_cast<uint32_t>(s.ssm_k_heads));
    w->SetUint32(a + "ssm.time_step_rank", static_cast<uint32_t>(s.ssm_v_heads));
    w->SetUint32(a + "ssm.inner_size", static_cast<uint32_t>(s.ssm_v_heads * s.ssm_head_dim));
    w->SetUint32(a + "full_attention_interval", static_cast<uint32_t>(s.full_attn_interval));
    // Qwen3.5's interleaved M-RoPE sections (the converter's default).
    std::vector<gguf::Value> sections;
    for (int v : {11, 11, 10, 0}) sections.push_back(gguf::Value::Int(gguf::ValueType::kInt32, v));
    w->Set(a + "rope.dimension_sections", gguf::Value::ArrayOf(gguf::ValueType::kInt32, std::move(sections)));
    if (s.n_expert > 0) {
      w->SetUint32(a + "expert_shared_feed_forward_length", static_cast<uint32_t>(s.n_ff_expert));
    }
  }
  // What llama.cpp's glm4moe and minimax-m2 converters write beyond the common keys.
  if (model.arch == "glm4moe") {
    w->SetUint32(a + "leading_dense_block_count", static_cast<uint32_t>(s.n_leading_dense));
    w->SetUint32(a + "expert_shared_count", static_cast<uint32_t>(s.n_expert_shared));
    w->SetUint32(a + "expert_gating_func", 2);  // sigmoid
    w->SetFloat32(a + "expert_weights_scale", model.expert_weights_scale);
    w->SetBool(a + "expert_weights_norm", true);
    if (s.n_nextn_layer > 0) w->SetUint32(a + "nextn_predict_layers", static_cast<uint32_t>(s.n_nextn_layer));
  }
  if (model.arch == "minimax-m2") w->SetUint32(a + "expert_gating_func", 2);
  if (model.n_swa > 0) {
    w->SetUint32(a + "attention.sliding_window", static_cast<uint32_t>(model.n_swa));
    w->SetString(a + "rope.scaling.type", "yarn");
    w->SetFloat32(a + "rope.scaling.factor", model.yarn_factor);
    w->SetUint32(a + "rope.scaling.original_context_length", static_cast<uint32_t>(model.yarn_orig_ctx));
  }
  if (s.n_expert > 0) {
    w->SetUint32(a + "expert_count", static_cast<uint32_t>(s.n_expert));
    w->SetUint32(a + "expert_used_count", static_cast<uint32_t>(s.n_expert_used));
    w->SetUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(s.n_ff_expert));
  }
}

}  // namespace

Status Synthesize(const SynthOptions& options, ThreadPool* pool) {
  const SynthModel* model = FindSynthModel(options.shape);
  if (model == nullptr) {
    std::string names;
    for (const SynthModel& s : SynthModels()) {
      if (!names.empty()) names += ", ";
      names += s.name;
    }
    return InvalidArgument("unknown --shape '" + options.shape + "' (known: " + names + ")");
  }
  COHORT_ASSIGN_OR_RETURN(plan::ModelShape shape, plan::FindBuiltinShape(model->name));
  if (!options.arch.empty() && options.arch != model->arch) {
    return InvalidArgument("shape '" + model->name + "' is architecture '" + model->arch +
                           "', not '" + options.arch + "'");
  }
  if (options.n_layer_override > 0) shape.n_layer = options.n_layer_override;
  COHORT_ASSIGN_OR_RETURN(TypeChoice types, ChooseTypes(options.type, options.pure));

  const std::string vocab_path =
      options.vocab_file.empty() ? options.vocab_dir + "/" + model->vocab : options.vocab_file;
  auto vocab = gguf::File::Open(vocab_path);
  if (!vocab.ok()) {
    return vocab.status().Annotate("vocabulary " + vocab_path +
                                   " (run scripts/fetch-test-data.sh to fetch it)");
  }
  const gguf::Value* tokens = (*vocab)->Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->type != gguf::ValueType::kArray) {
    return Corrupt(vocab_path + " has no tokenizer.ggml.tokens");
  }
  const int n_vocab = static_cast<int>(std::get<gguf::Array>(tokens->data).items.size());

  gguf::Writer writer;
  writer.SetString("general.architecture", model->arch);
  writer.SetString("general.name", "cohort synth " + model->name + " " + options.type +
                                       " (random weights: its text is noise)");
  writer.SetUint32("general.file_type", types.file_type);
  for (const gguf::KeyValue& kv : (*vocab)->metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) writer.Set(kv.key, kv.value);
  }
  SetHyperparameters(shape, *model, n_vocab, &writer);
  std::optional<gguf::ImportanceMatrix> imatrix;
  if (!options.imatrix.empty()) {
    auto loaded = gguf::ImportanceMatrix::Load(options.imatrix);
    if (!loaded.ok()) return loaded.status();
    imatrix = std::move(*loaded);
  }
  const std::vector<TensorSpec> tensors = Tensors(shape, *model, types, n_vocab);
  // Tensors are made one at a time as the writer reaches them, so memory stays at the
  // largest tensor rather than the model.
  for (const TensorSpec& t : tensors) {
    const std::vector<float>* importance = nullptr;
    if (imatrix && kernels::TakesImportance(t.type)) {
      importance = imatrix->Find(t.name);
      const int64_t want = t.ne[0] * (t.ne.size() > 2 ? t.ne[2] : 1);
      if (importance != nullptr && static_cast<int64_t>(importance->size()) != want) {
        return InvalidArgument(options.imatrix + ": " + t.name + " has " + std::to_string(importance->size()) +
                               " importance values, the shape's tensor " + std::to_string(want) +
                               " (a matrix of another model?)");
      }
    }
    writer.AddStreamedTensor(t.name, t.type, t.ne, [t, seed = options.seed, importance, pool](std::span<uint8_t> out) {
      return FillData(t, seed, importance, pool, out);
    });
  }
  return writer.WriteFile(options.output);
}

}  // namespace cohort::model
