// ModelShape and QuantScheme from a GGUF's metadata and tensor table. The dimension keys are
// read here and nowhere else: model::ModelConfig::FromGguf takes its dimensions from
// ModelShapeFromGguf and reads only the runtime settings (rope, norms, routing) itself, so the
// planner and the model cannot disagree about a file's shape.
#include "plan/gguf_shape.h"

#include <algorithm>
#include <variant>

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace cohort::plan {
namespace {

// Typed reads of `<arch>.<key>` whose errors name the full key; the messages are the ones
// model::ModelConfig has always given for the same keys.
class IntReader {
 public:
  IntReader(const gguf::File& file, std::string prefix) : file_(file), prefix_(std::move(prefix)) {}

  std::string Key(const char* key) const { return prefix_ + "." + key; }
  bool Has(const char* key) const { return file_.Find(Key(key)) != nullptr; }

  Result<int> Int(const char* key) const {
    auto v = file_.GetInt(Key(key));
    if (!v.ok()) return v.status().Annotate("model metadata");
    return Checked(key, *v);
  }
  Result<int> Int(const char* key, int fallback) const {
    auto v = file_.GetInt(Key(key), fallback);
    if (!v.ok()) return v.status().Annotate("model metadata");
    return Checked(key, *v);
  }

 private:
  Result<int> Checked(const char* key, int64_t v) const {
    if (v < 0 || v > (int64_t{1} << 30)) {
      return Corrupt(fmt::format("model metadata: {} = {} is out of range", Key(key), v));
    }
    return static_cast<int>(v);
  }

  const gguf::File& file_;
  std::string prefix_;
};

// llama.cpp's order: an explicit vocab_size, else the tokenizer's token list, else the rows
// of the output (or tied embedding) matrix.
Result<int> VocabSize(const gguf::File& file, const IntReader& keys) {
  if (keys.Has("vocab_size")) return keys.Int("vocab_size");
  if (const gguf::Value* tokens = file.Find("tokenizer.ggml.tokens")) {
    if (tokens->type != gguf::ValueType::kArray) {
      return Corrupt("tokenizer.ggml.tokens is not an array");
    }
    return static_cast<int>(std::get<gguf::Array>(tokens->data).items.size());
  }
  const gguf::TensorInfo* out = file.FindTensor("output.weight");
  if (out == nullptr) out = file.FindTensor("token_embd.weight");
  if (out == nullptr || out->ne.size() < 2) {
    return Corrupt("cannot tell the vocabulary size: no tokenizer.ggml.tokens, no output tensor");
  }
  return static_cast<int>(out->ne[1]);
}

// Routed and shared experts; a dense file (no expert_count) leaves them all 0.
Status ReadExperts(const IntReader& keys, ModelShape* m) {
  COHORT_ASSIGN_OR_RETURN(m->n_expert, keys.Int("expert_count", 0));
  if (m->n_expert == 0) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(m->n_expert_used, keys.Int("expert_used_count"));
  COHORT_ASSIGN_OR_RETURN(m->n_ff_expert, keys.Int("expert_feed_forward_length"));
  COHORT_ASSIGN_OR_RETURN(m->n_expert_shared, keys.Int("expert_shared_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_leading_dense, keys.Int("leading_dense_block_count", 0));
  return Status::Ok();
}

// deepseek2's multi-head latent attention. The rope part of each head is
// rope.dimension_count wide and the rest of key_length_mla is the "nope" part.
Status ReadMla(const IntReader& keys, ModelShape* m) {
  COHORT_ASSIGN_OR_RETURN(m->qk_rope_dim, keys.Int("rope.dimension_count", m->head_dim));
  COHORT_ASSIGN_OR_RETURN(m->q_lora_rank, keys.Int("attention.q_lora_rank", 0));
  COHORT_ASSIGN_OR_RETURN(m->kv_lora_rank, keys.Int("attention.kv_lora_rank"));
  if (!keys.Has("attention.key_length_mla") || !keys.Has("attention.value_length_mla")) {
    return Unsupported("deepseek2 file without attention.key_length_mla/value_length_mla "
                       "(legacy fused attn_kv_b layout) is not supported; reconvert it");
  }
  COHORT_ASSIGN_OR_RETURN(int k_mla, keys.Int("attention.key_length_mla"));
  COHORT_ASSIGN_OR_RETURN(m->v_head_dim, keys.Int("attention.value_length_mla"));
  m->qk_nope_dim = k_mla - m->qk_rope_dim;
  if (m->qk_nope_dim < 1) {
    return Corrupt(fmt::format("deepseek2: key_length_mla {} must exceed rope.dimension_count {}",
                               k_mla, m->qk_rope_dim));
  }
  return Status::Ok();
}

// Qwen3.5 / Qwen3-Next's gated DeltaNet layers: the ssm.* widths, which layers are recurrent
// (attention.recurrent_layers when the converter wrote it, else every layer but each
// full_attention_interval-th, default 4, as llama.cpp's loader reads them), and the shared
// expert that every qwen35moe layer has, whose width is expert_shared_feed_forward_length
// (else feed_forward_length); it must equal a routed expert's, the only case the FFN block
// here computes.
Status ReadHybrid(const gguf::File& file, const IntReader& keys, ModelShape* m) {
  COHORT_ASSIGN_OR_RETURN(m->ssm_conv_kernel, keys.Int("ssm.conv_kernel"));
  COHORT_ASSIGN_OR_RETURN(m->ssm_head_dim, keys.Int("ssm.state_size"));
  COHORT_ASSIGN_OR_RETURN(m->ssm_k_heads, keys.Int("ssm.group_count"));
  COHORT_ASSIGN_OR_RETURN(m->ssm_v_heads, keys.Int("ssm.time_step_rank"));
  COHORT_ASSIGN_OR_RETURN(int d_inner, keys.Int("ssm.inner_size"));
  if (m->ssm_v_heads <= 0 || d_inner != m->ssm_v_heads * m->ssm_head_dim) {
    return Unsupported(fmt::format("{} = {} is not time_step_rank x state_size ({} x {}): value "
                                   "heads wider than key heads are not supported",
                                   keys.Key("ssm.inner_size"), d_inner, m->ssm_v_heads,
                                   m->ssm_head_dim));
  }
  if (const gguf::Value* list = file.Find(keys.Key("attention.recurrent_layers"))) {
    const gguf::Array* a = list->array();
    if (a == nullptr || static_cast<int>(a->items.size()) < m->n_layer) {
      return Corrupt(fmt::format("{} must be an array of at least block_count ({}) entries",
                                 keys.Key("attention.recurrent_layers"), m->n_layer));
    }
    for (int l = 0; l < m->n_layer; ++l) {
      const gguf::Value& v = a->items[l];
      bool recurrent = false;
      if (const bool* b = std::get_if<bool>(&v.data)) {
        recurrent = *b;
      } else if (const int64_t* i = std::get_if<int64_t>(&v.data)) {
        recurrent = *i != 0;
      } else if (const uint64_t* u = std::get_if<uint64_t>(&v.data)) {
        recurrent = *u != 0;
      } else {
        return Corrupt(keys.Key("attention.recurrent_layers") + " holds a non-boolean entry");
      }
      m->recurrent_layers.push_back(recurrent ? 1 : 0);
    }
  } else {
    COHORT_ASSIGN_OR_RETURN(m->full_attn_interval, keys.Int("full_attention_interval", 4));
    if (m->full_attn_interval <= 0) {
      return Corrupt(fmt::format("{} must be positive", keys.Key("full_attention_interval")));
    }
  }
  if (m->n_expert > 0) {  // llama.cpp: the shared width defaults to feed_forward_length
    COHORT_ASSIGN_OR_RETURN(int n_ff_shexp, keys.Int("expert_shared_feed_forward_length", m->n_ff));
    if (n_ff_shexp != m->n_ff_expert) {
      return Unsupported(fmt::format("{} = {} differs from expert_feed_forward_length {}: a "
                                     "shared expert of another width is not supported",
                                     keys.Key("expert_shared_feed_forward_length"), n_ff_shexp,
                                     m->n_ff_expert));
    }
    m->n_expert_shared = 1;
  }
  return Status::Ok();
}

// Bits per weight of each tensor class as stored, and the widest quant block among them.
QuantScheme MeasureQuant(const gguf::File& file) {
  double bytes[4] = {0, 0, 0, 0}, elems[4] = {0, 0, 0, 0};  // expert, dense, embd, output
  int64_t block = 1;
  for (const gguf::TensorInfo& t : file.tensors()) {
    if (t.ne.size() < 2) continue;  // norms and biases
    int cls = 1;
    if (t.name.find("_exps") != std::string::npos) cls = 0;
    if (t.name == "token_embd.weight") cls = 2;
    if (t.name == "output.weight") cls = 3;
    bytes[cls] += static_cast<double>(t.n_bytes);
    elems[cls] += static_cast<double>(t.n_elements());
    if (cls < 2) block = std::max(block, Traits(t.type).block_size);
  }
  auto bits = [&](int cls, double fallback) {
    return elems[cls] > 0 ? 8 * bytes[cls] / elems[cls] : fallback;
  };
  QuantScheme q;
  q.name = "as stored";
  q.bits_dense = bits(1, 16);
  q.bits_expert = bits(0, q.bits_dense);
  q.bits_embd = bits(2, q.bits_dense);
  q.bits_output = bits(3, q.bits_embd);
  q.block = static_cast<int>(block);
  q.note = "measured from the file's tensor types";
  return q;
}

}  // namespace

Result<ModelShape> ModelShapeFromGguf(const gguf::File& file) {
  const std::string arch = file.architecture();
  if (arch.empty()) return Corrupt("general.architecture is missing");
  const IntReader keys(file, arch);
  ModelShape m;
  COHORT_ASSIGN_OR_RETURN(m.n_embd, keys.Int("embedding_length"));
  COHORT_ASSIGN_OR_RETURN(m.n_layer, keys.Int("block_count"));
  // llama.cpp's n_layer() is block_count less the next-token-prediction blocks (glm4moe
  // stores them after the trunk and skips them in the forward pass).
  COHORT_ASSIGN_OR_RETURN(m.n_nextn_layer, keys.Int("nextn_predict_layers", 0));
  if (m.n_nextn_layer >= m.n_layer) {
    return Corrupt(fmt::format("{} = {} leaves no layers of {} = {}", keys.Key("nextn_predict_layers"),
                               m.n_nextn_layer, keys.Key("block_count"), m.n_layer));
  }
  m.n_layer -= m.n_nextn_layer;
  COHORT_ASSIGN_OR_RETURN(m.n_ff, keys.Int("feed_forward_length", 0));
  COHORT_ASSIGN_OR_RETURN(m.n_head, keys.Int("attention.head_count"));
  // As stored: llama.cpp's deepseek2 converter writes 1 (MQA over the latent).
  COHORT_ASSIGN_OR_RETURN(m.n_head_kv, keys.Int("attention.head_count_kv", m.n_head));
  if (m.n_head <= 0) return Corrupt(fmt::format("{} must be positive", keys.Key("attention.head_count")));
  const int head_dim = m.n_embd / m.n_head;
  COHORT_ASSIGN_OR_RETURN(m.head_dim, keys.Int("attention.key_length", head_dim));
  COHORT_ASSIGN_OR_RETURN(m.head_dim_v, keys.Int("attention.value_length", head_dim));
  // MLA is read only for deepseek2, the architecture DeepSeek-V2/V3 and Kimi K2 files carry.
  if (arch == "deepseek2") COHORT_RETURN_IF_ERROR(ReadMla(keys, &m));
  COHORT_ASSIGN_OR_RETURN(m.n_vocab, VocabSize(file, keys));
  COHORT_RETURN_IF_ERROR(ReadExperts(keys, &m));
  if (arch == "qwen35" || arch == "qwen35moe") COHORT_RETURN_IF_ERROR(ReadHybrid(file, keys, &m));
  m.tied_embeddings = file.FindTensor("output.weight") == nullptr;
  return m;
}

Result<int> TrainedContextFromGguf(const gguf::File& file) {
  return IntReader(file, file.architecture()).Int("context_length");
}

Result<GgufModel> ReadGgufModel(const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  return ReadGgufModel(*file);
}

Result<GgufModel> ReadGgufModel(const gguf::File& opened) {
  const gguf::File* file = &opened;
  const std::string& path = opened.path();
  GgufModel out;
  auto shape = ModelShapeFromGguf(*file);
  if (!shape.ok()) return shape.status().Annotate(path);
  out.shape = *std::move(shape);
  out.shape.name = path;
  COHORT_RETURN_IF_ERROR(out.shape.Validate().Annotate(path));
  auto n_ctx = TrainedContextFromGguf(*file);
  if (!n_ctx.ok()) return n_ctx.status().Annotate(path);
  out.n_ctx_train = *n_ctx;
  out.quant = MeasureQuant(*file);
  out.file_bytes = static_cast<double>(file->file_size());
  return out;
}

}  // namespace cohort::plan
