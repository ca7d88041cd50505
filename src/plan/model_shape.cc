// Parameter accounting for ModelShape, and the built-in model shapes and quantization schemes.
#include "plan/model_shape.h"

#include <algorithm>
#include <cctype>

namespace cohort::plan {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// DeepSeek-V3 architecture (DeepseekV3ForCausalLM) with the fields both models share.
ModelShape DeepSeekV3Arch(std::string name, int n_head, int n_expert, int n_leading_dense,
                          int n_vocab) {
  ModelShape m;
  m.name = std::move(name);
  m.n_layer = 61;
  m.n_embd = 7168;
  m.n_head = n_head;
  m.n_head_kv = n_head;
  m.q_lora_rank = 1536;
  m.kv_lora_rank = 512;
  m.qk_nope_dim = 128;
  m.qk_rope_dim = 64;
  m.v_head_dim = 128;
  m.n_ff = 18432;
  m.n_leading_dense = n_leading_dense;
  m.n_expert = n_expert;
  m.n_expert_used = 8;
  m.n_ff_expert = 2048;
  m.n_expert_shared = 1;
  m.n_vocab = n_vocab;
  return m;
}

// A dense GQA model (Llama 3, Qwen3).
ModelShape Dense(std::string name, int n_layer, int n_embd, int n_head, int n_head_kv, int head_dim,
                 int n_ff, int n_vocab, bool tied) {
  ModelShape m;
  m.name = std::move(name);
  m.n_layer = n_layer;
  m.n_embd = n_embd;
  m.n_head = n_head;
  m.n_head_kv = n_head_kv;
  m.head_dim = head_dim;
  m.head_dim_v = head_dim;
  m.n_ff = n_ff;
  m.n_vocab = n_vocab;
  m.tied_embeddings = tied;
  return m;
}

// GLM-4.5-Air (zai-org/GLM-4.5-Air config.json, Glm4MoeForCausalLM): 46 layers, the first
// dense (first_k_dense_replace 1, intermediate_size 10944), then 128 routed experts of 1408
// with 1 shared and 8 used, GQA 96/8 with 128-dim heads (RoPE on half of each:
// partial_rotary_factor 0.5), vocab 151552, untied, plus one MTP block
// (num_nextn_predict_layers 1) that llama.cpp's converter stores as blk.46. Counted: 106.9B,
// 12.8B active (published: 106B / 12B; llama.cpp names 46 layers LLM_TYPE_106B_A12B).
// MiniMax-M2 (MiniMaxAI/MiniMax-M2 config.json, MiniMaxM2ForCausalLM): 62 layers, every one
// MoE with 256 experts of 1536 (intermediate_size, which the converter writes as both
// feed_forward_length and expert_feed_forward_length), 8 used, no shared expert; GQA 48/8 with
// 128-dim heads (rotary_dim 64), vocab 200064, untied. Counted: 228.7B, 10.4B active
// (published 230B / 10B; llama.cpp: 62 layers = LLM_TYPE_230B_A10B).
// The "-mini" shapes keep each one's structure (GLM: a leading dense layer, one shared
// expert, an MTP block; both: 128-dim heads with 64 rotated, GQA) at a size `cohort synth`
// writes in a moment, for the tests and small benchmarks: 256 wide, 6/2 heads, 16 experts of
// 128 with 4 used.
std::vector<ModelShape> GlmAndMiniMaxShapes() {
  std::vector<ModelShape> out;
  ModelShape glm = Dense("glm-4.5-air", 46, 4096, 96, 8, 128, 10944, 151552, false);
  glm.n_leading_dense = 1;
  glm.n_expert = 128;
  glm.n_expert_used = 8;
  glm.n_ff_expert = 1408;
  glm.n_expert_shared = 1;
  glm.n_nextn_layer = 1;
  out.push_back(glm);
  ModelShape glm_mini = Dense("glm-4.5-air-mini", 4, 256, 6, 2, 128, 512, 151552, false);
  glm_mini.n_leading_dense = 1;
  glm_mini.n_expert = 16;
  glm_mini.n_expert_used = 4;
  glm_mini.n_ff_expert = 128;
  glm_mini.n_expert_shared = 1;
  glm_mini.n_nextn_layer = 1;
  out.push_back(glm_mini);
  ModelShape mm = Dense("minimax-m2", 62, 3072, 48, 8, 128, 1536, 200064, false);
  mm.n_expert = 256;
  mm.n_expert_used = 8;
  mm.n_ff_expert = 1536;
  out.push_back(mm);
  ModelShape mm_mini = Dense("minimax-m2-mini", 3, 256, 6, 2, 128, 128, 200064, false);
  mm_mini.n_expert = 16;
  mm_mini.n_expert_used = 4;
  mm_mini.n_ff_expert = 128;
  out.push_back(mm_mini);
  return out;
}

}  // namespace

Status ModelShape::Validate() const {
  if (n_layer <= 0 || n_embd <= 0 || n_head <= 0 || n_head_kv <= 0 || n_vocab <= 0) {
    return InvalidArgument("model '" + name + "': layers, embedding, heads and vocabulary must be positive");
  }
  if (n_head % n_head_kv != 0) return InvalidArgument("model '" + name + "': n_head % n_head_kv != 0");
  if (!is_mla() && head_dim <= 0) return InvalidArgument("model '" + name + "': head_dim must be positive");
  if (is_mla() && (qk_nope_dim + qk_rope_dim <= 0 || v_head_dim <= 0)) {
    return InvalidArgument("model '" + name + "': MLA needs qk_nope_dim/qk_rope_dim and v_head_dim");
  }
  if (is_moe()) {
    if (n_expert_used <= 0 || n_expert_used > n_expert || n_ff_expert <= 0) {
      return InvalidArgument("model '" + name + "': MoE needs 0 < n_expert_used <= n_expert and n_ff_expert");
    }
    if (n_leading_dense < 0 || n_leading_dense > n_layer || (n_leading_dense > 0 && n_ff <= 0)) {
      return InvalidArgument("model '" + name + "': bad leading dense layers");
    }
  } else if (n_ff <= 0) {
    return InvalidArgument("model '" + name + "': a dense model needs n_ff");
  }
  if (n_nextn_layer < 0) return InvalidArgument("model '" + name + "': negative MTP block count");
  if (is_hybrid()) {
    if (ssm_k_heads <= 0 || ssm_head_dim <= 0 || ssm_conv_kernel < 2 || ssm_v_heads % ssm_k_heads != 0) {
      return InvalidArgument("model '" + name + "': DeltaNet layers need k heads dividing v heads, "
                             "a head width and a conv kernel >= 2");
    }
    if (recurrent_layers.empty() && full_attn_interval <= 0) {
      return InvalidArgument("model '" + name + "': hybrid model without full_attention_interval");
    }
    if (!recurrent_layers.empty() && static_cast<int>(recurrent_layers.size()) < n_layer) {
      return InvalidArgument("model '" + name + "': recurrent_layers lists fewer than n_layer layers");
    }
  }
  return Status::Ok();
}

bool ModelShape::is_recurrent_layer(int layer) const {
  if (!is_hybrid()) return false;
  if (!recurrent_layers.empty()) return recurrent_layers[layer] != 0;
  return (layer + 1) % full_attn_interval != 0;  // llama.cpp's rule for the interval
}

int ModelShape::n_recurrent_layers() const {
  int n = 0;
  for (int l = 0; l < n_layer; ++l) n += is_recurrent_layer(l) ? 1 : 0;
  return n;
}

double ModelShape::LinearAttnParams() const {
  const double k = static_cast<double>(ssm_k_heads) * ssm_head_dim;
  const double v = static_cast<double>(ssm_v_heads) * ssm_head_dim;
  // qkv and z in-projections, beta and alpha, conv kernel, output projection.
  return n_embd * (2 * k + v) + n_embd * v + 2.0 * n_embd * ssm_v_heads +
         ssm_conv_kernel * (2 * k + v) + v * n_embd;
}

double ModelShape::RecurrentStateElements() const {
  const double conv = (ssm_conv_kernel - 1.0) * (2.0 * ssm_k_heads + ssm_v_heads) * ssm_head_dim;
  const double delta = static_cast<double>(ssm_v_heads) * ssm_head_dim * ssm_head_dim;
  return n_recurrent_layers() * (conv + delta);
}

double ModelShape::AttnReplicatedParams() const {
  if (!is_mla()) return 0;
  // The down-projections to the latents are computed by every rank of a tensor-parallel group.
  return static_cast<double>(n_embd) * q_lora_rank +
         static_cast<double>(n_embd) * (kv_lora_rank + qk_rope_dim);
}

double ModelShape::AttnPerQHeadParams() const {
  // wq rows (twice for a hybrid model's gated queries), wo columns.
  if (!is_mla()) return static_cast<double>(n_embd) * ((is_hybrid() ? 2 : 1) * head_dim + v_dim());
  const double qk = qk_nope_dim + qk_rope_dim;
  const double q_in = q_lora_rank > 0 ? q_lora_rank : n_embd;
  return q_in * qk + static_cast<double>(kv_lora_rank) * (qk_nope_dim + v_head_dim) +
         static_cast<double>(v_head_dim) * n_embd;
}

double ModelShape::AttnPerKvHeadParams() const {
  return is_mla() ? 0 : static_cast<double>(n_embd) * (head_dim + v_dim());  // wk and wv rows
}

double ModelShape::AttnParams() const {
  return AttnReplicatedParams() + n_head * AttnPerQHeadParams() + n_head_kv * AttnPerKvHeadParams();
}

double ModelShape::TotalParams() const {
  const int n_rec = n_recurrent_layers();
  double layer_sum = (n_layer - n_rec) * AttnParams() + n_rec * LinearAttnParams() +
                     n_dense_layers() * DenseFfnParams();
  layer_sum += n_moe_layers() * (n_expert * ExpertParams() + SharedExpertParams() + RouterParams());
  return layer_sum + EmbeddingParams() * (tied_embeddings ? 1 : 2);
}

double ModelShape::ActiveParams() const {
  const int n_rec = n_recurrent_layers();
  double layer_sum = (n_layer - n_rec) * AttnParams() + n_rec * LinearAttnParams() +
                     n_dense_layers() * DenseFfnParams();
  layer_sum +=
      n_moe_layers() * (n_expert_used * ExpertParams() + SharedExpertParams() + RouterParams());
  return layer_sum + EmbeddingParams() + n_embd;  // the whole output matrix, one embedding row
}

double ModelShape::KvElementsPerToken() const {
  if (is_mla()) return kv_lora_rank + qk_rope_dim;
  const double per_layer = static_cast<double>(n_head_kv) * (head_dim + v_dim());
  // A hybrid model caches keys and values in its full-attention layers only: the average over
  // layers, since callers multiply by the layer count (the recurrent state does not grow).
  if (is_hybrid()) return per_layer * (n_layer - n_recurrent_layers()) / n_layer;
  return per_layer;
}

plan::PlanShape ModelShape::ToPlanShape(int block) const {
  plan::PlanShape p;
  p.n_layer = n_layer;
  p.n_embd = n_embd;
  p.n_head = n_head;
  p.n_head_kv = is_mla() ? n_head : n_head_kv;  // MLA: every query head reads the whole latent
  p.head_dim = is_mla() ? v_head_dim : v_dim();
  // Dense-FFN columns only matter where a layer has a dense FFN.
  p.n_ff = (!is_moe() || n_leading_dense > 0) ? n_ff : 0;
  p.n_expert = n_expert;
  p.n_ff_expert = is_moe() ? n_ff_expert : 0;
  p.n_ff_shexp = is_moe() ? n_expert_shared * n_ff_expert : 0;
  p.n_vocab = n_vocab;
  p.block = block;
  return p;
}

// Dimensions from each model's config.json on Hugging Face (Qwen/Qwen3-235B-A22B,
// moonshotai/Kimi-K2-Thinking, deepseek-ai/DeepSeek-V3, meta-llama/Llama-3.1-70B and -405B,
// meta-llama/Llama-3.2-1B, Qwen/Qwen3-0.6B and -1.7B). Counting them gives 235.1B/21.6B active,
// 1026B/31.7B, 671.0B/36.5B, 70.6B, 405.8B and 1.24B, matching the published totals.
// The two "-mini" shapes are scaled down so that `cohort synth` can imitate their models on a
// small machine: Qwen3-30B-A3B's per-layer structure (GQA 32/4, 128-dim heads, 768-wide
// experts, 8 active) with 12 of its 48 layers and 32 of its 128 experts; DeepSeek-V3's MLA
// head geometry (nope 128, rope 64, v 128), one shared expert and 8 active experts, with 6
// layers (one leading dense), 32 experts and narrower everything else.
std::vector<ModelShape> BuiltinShapes() {
  constexpr int kLlama3Vocab = 128256, kQwen3Vocab = 151936, kQwen35Vocab = 248320;
  std::vector<ModelShape> out;
  ModelShape qwen;
  qwen.name = "qwen3-235b-a22b";
  qwen.n_layer = 94;
  qwen.n_embd = 4096;
  qwen.n_head = 64;
  qwen.n_head_kv = 4;
  qwen.head_dim = 128;
  qwen.head_dim_v = 128;
  qwen.n_ff = 12288;  // present in config.json, unused: every layer is MoE
  qwen.n_expert = 128;
  qwen.n_expert_used = 8;
  qwen.n_ff_expert = 1536;
  qwen.n_vocab = kQwen3Vocab;
  out.push_back(qwen);
  out.push_back(DeepSeekV3Arch("kimi-k2", /*n_head=*/64, /*n_expert=*/384, /*n_leading_dense=*/1,
                               /*n_vocab=*/163840));
  out.push_back(DeepSeekV3Arch("deepseek-v3", 128, 256, 3, 129280));
  out.push_back(Dense("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, kLlama3Vocab, false));
  out.push_back(Dense("llama-3.1-405b", 126, 16384, 128, 8, 128, 53248, kLlama3Vocab, false));
  out.push_back(Dense("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, kLlama3Vocab, true));
  out.push_back(Dense("qwen3-0.6b", 28, 1024, 16, 8, 128, 3072, kQwen3Vocab, true));
  out.push_back(Dense("qwen3-1.7b", 28, 2048, 16, 8, 128, 6144, kQwen3Vocab, true));
  ModelShape qwen_mini = Dense("qwen3-30b-a3b-mini", 12, 2048, 32, 4, 128, 6144, kQwen3Vocab, false);
  qwen_mini.n_expert = 32;
  qwen_mini.n_expert_used = 8;
  qwen_mini.n_ff_expert = 768;
  out.push_back(qwen_mini);
  ModelShape ds_mini = DeepSeekV3Arch("deepseek-v3-mini", /*n_head=*/16, /*n_expert=*/32,
                                      /*n_leading_dense=*/1, /*n_vocab=*/129280);
  ds_mini.n_layer = 6;
  ds_mini.n_embd = 1024;
  ds_mini.q_lora_rank = 384;
  ds_mini.kv_lora_rank = 256;
  ds_mini.n_ff = 2816;
  ds_mini.n_ff_expert = 256;
  out.push_back(ds_mini);
  for (ModelShape& m : GlmAndMiniMaxShapes()) out.push_back(std::move(m));
  // Qwen3.5 MoE (Qwen3_5MoeForConditionalGeneration text_config of Qwen/Qwen3.5-397B-A17B and
  // Qwen/Qwen3.5-35B-A3B, as llama.cpp's qwen35moe loader reads them): gated DeltaNet layers
  // (128-wide heads, conv kernel 4) with every 4th layer gated full attention (GQA, 256-wide
  // heads), 1 shared expert as wide as a routed one in every layer.
  auto qwen35moe = [](std::string name, int n_layer, int n_embd, int n_head, int n_expert,
                      int n_used, int n_ff_expert, int ssm_v_heads) {
    ModelShape m = Dense(std::move(name), n_layer, n_embd, n_head, /*n_head_kv=*/2,
                         /*head_dim=*/256, /*n_ff=*/0, kQwen35Vocab, false);
    m.n_expert = n_expert;
    m.n_expert_used = n_used;
    m.n_ff_expert = n_ff_expert;
    m.n_expert_shared = 1;
    m.ssm_conv_kernel = 4;
    m.ssm_head_dim = 128;
    m.ssm_k_heads = 16;
    m.ssm_v_heads = ssm_v_heads;
    m.full_attn_interval = 4;
    return m;
  };
  out.push_back(qwen35moe("qwen3.5-397b-a17b", 60, 4096, 32, 512, 10, 1024, 64));
  out.push_back(qwen35moe("qwen3.5-35b-a3b", 40, 2048, 16, 256, 8, 512, 32));
  // Qwen3.5-35B-A3B's layer structure with 12 of its 40 layers and 32 of its 256 experts
  // (8 active), for `cohort synth` on a small machine.
  out.push_back(qwen35moe("qwen3.5-35b-a3b-mini", 12, 2048, 16, 32, 8, 512, 32));
  // Qwen/Qwen3.5-0.8B (dense, tied embeddings): the small hybrid model the golden tests use.
  ModelShape q35_small = qwen35moe("qwen3.5-0.8b", 24, 1024, 8, 0, 0, 0, 16);
  q35_small.n_expert_shared = 0;
  q35_small.n_ff = 3584;
  q35_small.tied_embeddings = true;
  out.push_back(q35_small);
  // openai/gpt-oss-120b and -20b (config.json: hidden 2880, 64 query / 8 KV heads of 64, 128
  // or 32 experts of 2880 columns, 4 active, o200k vocabulary): 116.8B / 5.1B active and
  // 20.9B / 3.6B. Every layer is MoE (n_ff is the GGUF's feed_forward_length, unused).
  constexpr int kGptOssVocab = 201088;
  ModelShape oss = Dense("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, kGptOssVocab, false);
  oss.n_expert = 128;
  oss.n_expert_used = 4;
  oss.n_ff_expert = 2880;
  out.push_back(oss);
  ModelShape oss20 = oss;
  oss20.name = "gpt-oss-20b";
  oss20.n_layer = 24;
  oss20.n_expert = 32;
  out.push_back(oss20);
  ModelShape oss_mini = oss;
  oss_mini.name = "gpt-oss-120b-mini";
  oss_mini.n_layer = 12;
  oss_mini.n_expert = 32;
  out.push_back(oss_mini);
  // A tiny gpt-oss for golden tests (GQA 8/2 of 32, 8 experts of 128, 2 active).
  ModelShape oss_test = Dense("gpt-oss-test", 2, 256, 8, 2, 32, 128, 50257, false);  // gpt-2 vocabulary
  oss_test.n_expert = 8;
  oss_test.n_expert_used = 2;
  oss_test.n_ff_expert = 128;
  out.push_back(oss_test);
  return out;
}

Result<ModelShape> FindBuiltinShape(const std::string& name) {
  const std::string want = Lower(name);
  for (const ModelShape& m : BuiltinShapes()) {
    if (m.name == want) return m;
  }
  if (want == "kimi-k2-thinking" || want == "kimi-k2-instruct") return FindBuiltinShape("kimi-k2");
  std::string names;
  for (const ModelShape& m : BuiltinShapes()) names += (names.empty() ? "" : ", ") + m.name;
  return NotFound("no built-in model shape '" + name + "' (have: " + names + ")");
}

// Bits per weight include the block scales: Q8_0 stores 32 int8 + one fp16 scale (8.5 bits),
// Q4_0 32 nibbles + fp16 scale (4.5), MLX affine groups of 64 add an fp16 scale and bias
// (+0.5 bit), K-quants per llama.cpp's block layouts (Q4_K 4.5, Q6_K 6.5625).
std::vector<QuantScheme> BuiltinQuants() {
  auto uniform = [](std::string name, double bits, int block, std::string note) {
    return QuantScheme{std::move(name), bits, bits, bits, bits, block, std::move(note)};
  };
  std::vector<QuantScheme> out;
  out.push_back(uniform("f16", 16, 1, "unquantized (f16/bf16)"));
  out.push_back(uniform("q8_0", 8.5, 32, "llama.cpp Q8_0"));
  out.push_back(uniform("q4_0", 4.5, 32, "llama.cpp Q4_0"));
  // Q4_K_M: Q4_K almost everywhere, Q6_K for about half of ffn_down/attn_v and the output.
  out.push_back({"q4_k_m", 4.85, 4.85, 4.5, 6.5625, 256, "llama.cpp Q4_K_M (average)"});
  out.push_back(uniform("mlx-8bit", 8.5, 64, "MLX affine 8-bit, group 64"));
  out.push_back(uniform("mlx-4bit", 4.5, 64, "MLX affine 4-bit, group 64"));
  out.push_back({"int4-native", 4.5, 16, 16, 16, 32,
                 "Kimi K2 Thinking as released: INT4 (group 32, bf16 scale) routed experts, "
                 "BF16 everything else; what MLX loads without requantizing"});
  out.push_back({"q4_0-experts-q8_0", 4.5, 8.5, 8.5, 8.5, 32,
                 "llama.cpp GGUF of the INT4 release: experts repacked to Q4_0, the rest Q8_0"});
  return out;
}

Result<QuantScheme> FindBuiltinQuant(const std::string& name) {
  const std::string want = Lower(name);
  for (const QuantScheme& q : BuiltinQuants()) {
    if (q.name == want) return q;
  }
  if (want == "bf16") return FindBuiltinQuant("f16");
  std::string names;
  for (const QuantScheme& q : BuiltinQuants()) names += (names.empty() ? "" : ", ") + q.name;
  return NotFound("no built-in quantization '" + name + "' (have: " + names + ")");
}

}  // namespace cohort::plan
