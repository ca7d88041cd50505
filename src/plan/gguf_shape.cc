// ModelShape and QuantScheme from a GGUF's metadata and tensor table. Written against the
// gguf reader only, so the planner does not depend on the model layer; it reads the same
// llama.cpp keys that model::ModelConfig parses.
#include "plan/gguf_shape.h"

#include <algorithm>

#include "gguf/gguf.h"

namespace cohort::plan {
namespace {

Result<int> Key(const gguf::File& file, const std::string& arch, const char* key, int64_t fallback) {
  COHORT_ASSIGN_OR_RETURN(int64_t v, file.GetInt(arch + "." + key, fallback));
  if (v < 0 || v > (1 << 30)) return Corrupt(arch + "." + key + " out of range");
  return static_cast<int>(v);
}

Result<int> VocabSize(const gguf::File& file, const std::string& arch) {
  COHORT_ASSIGN_OR_RETURN(int vocab, Key(file, arch, "vocab_size", 0));
  if (vocab > 0) return vocab;
  auto tokens = file.GetArray("tokenizer.ggml.tokens");
  if (tokens.ok()) return static_cast<int>((*tokens)->items.size());
  const gguf::TensorInfo* t = file.FindTensor("token_embd.weight");
  if (t == nullptr || t->ne.size() < 2) return Corrupt("cannot tell the vocabulary size");
  return static_cast<int>(t->ne[1]);
}

Status ReadDims(const gguf::File& file, const std::string& a, ModelShape* m) {
  COHORT_ASSIGN_OR_RETURN(m->n_layer, Key(file, a, "block_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_embd, Key(file, a, "embedding_length", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_head, Key(file, a, "attention.head_count", 0));
  // Per-layer head counts (an array) are not modelled; such files fall back to n_head.
  auto kv = Key(file, a, "attention.head_count_kv", m->n_head);
  m->n_head_kv = kv.ok() ? *kv : m->n_head;
  COHORT_ASSIGN_OR_RETURN(int key_length, Key(file, a, "attention.key_length", 0));
  m->head_dim = key_length > 0 ? key_length : (m->n_head > 0 ? m->n_embd / m->n_head : 0);
  COHORT_ASSIGN_OR_RETURN(m->n_ff, Key(file, a, "feed_forward_length", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_expert, Key(file, a, "expert_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_expert_used, Key(file, a, "expert_used_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_ff_expert, Key(file, a, "expert_feed_forward_length", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_expert_shared, Key(file, a, "expert_shared_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->n_leading_dense, Key(file, a, "leading_dense_block_count", 0));
  COHORT_ASSIGN_OR_RETURN(m->kv_lora_rank, Key(file, a, "attention.kv_lora_rank", 0));
  if (m->kv_lora_rank > 0) {
    COHORT_ASSIGN_OR_RETURN(m->q_lora_rank, Key(file, a, "attention.q_lora_rank", 0));
    COHORT_ASSIGN_OR_RETURN(m->qk_rope_dim, Key(file, a, "rope.dimension_count", 64));
    COHORT_ASSIGN_OR_RETURN(int k_mla, Key(file, a, "attention.key_length_mla", 0));
    COHORT_ASSIGN_OR_RETURN(m->v_head_dim, Key(file, a, "attention.value_length_mla", 0));
    m->qk_nope_dim = std::max(0, k_mla - m->qk_rope_dim);
    m->n_head_kv = m->n_head;  // every query head is computed from the shared latent
  }
  if (m->n_expert > 0 && m->n_ff_expert == 0) m->n_ff_expert = m->n_ff;
  COHORT_ASSIGN_OR_RETURN(m->n_vocab, VocabSize(file, a));
  m->tied_embeddings = file.FindTensor("output.weight") == nullptr;
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

Result<GgufModel> ReadGgufModel(const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(path));
  const std::string arch = file->architecture();
  if (arch.empty()) return Corrupt(path + ": no general.architecture");
  GgufModel out;
  out.shape.name = path;
  COHORT_RETURN_IF_ERROR(ReadDims(*file, arch, &out.shape).Annotate(path));
  COHORT_RETURN_IF_ERROR(out.shape.Validate().Annotate(path));
  out.quant = MeasureQuant(*file);
  out.file_bytes = static_cast<double>(file->file_size());
  return out;
}

}  // namespace cohort::plan
