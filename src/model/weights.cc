// WeightLoader and the shared weight-group loaders; see weights.h.
#include "model/weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gguf/gguf.h"
#include "kernels/quant.h"

namespace cohort::model {

std::string WeightLoader::Blk(int layer, const char* what, const char* suffix) {
  return fmt::format("blk.{}.{}.{}", layer, what, suffix);
}

bool WeightLoader::Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }

Result<TensorView> WeightLoader::Find(const std::string& name,
                                      const std::vector<int64_t>& ne) const {
  const gguf::TensorInfo* info = file_.FindTensor(name);
  if (info == nullptr) return NotFound(fmt::format("tensor '{}' is missing", name));
  std::vector<int64_t> have = info->ne;
  while (have.size() > 1 && have.back() == 1) have.pop_back();
  std::vector<int64_t> want = ne;
  while (want.size() > 1 && want.back() == 1) want.pop_back();
  if (have != want) {
    return Corrupt(fmt::format("tensor '{}' has shape [{}] but the model config implies [{}]",
                               name, fmt::join(have, ", "), fmt::join(want, ", ")));
  }
  if (have.size() > 4) return Corrupt(fmt::format("tensor '{}' has more than 4 dims", name));
  std::array<int64_t, 4> dims = {1, 1, 1, 1};
  for (size_t i = 0; i < have.size(); ++i) dims[i] = have[i];
  const std::span<const uint8_t> bytes = file_.TensorData(*info);
  return TensorView::Make(info->type, bytes.data(), dims);
}

Result<TensorView> WeightLoader::Matrix(const std::string& name, std::vector<int64_t> ne) const {
  COHORT_ASSIGN_OR_RETURN(TensorView v, Find(name, ne));
  if (!kernels::IsWeightType(v.type)) {
    return Unsupported(fmt::format("tensor '{}' has type {}, which matmul does not support", name,
                                   DTypeName(v.type)));
  }
  return v;
}

Result<TensorView> WeightLoader::OptionalMatrix(const std::string& name,
                                                std::vector<int64_t> ne) const {
  if (!Has(name)) return TensorView{};
  return Matrix(name, std::move(ne));
}

Result<TensorView> WeightLoader::Table(const std::string& name, std::vector<int64_t> ne) const {
  COHORT_ASSIGN_OR_RETURN(TensorView v, Find(name, ne));
  if (!kernels::IsRowType(v.type)) {
    return Unsupported(fmt::format("tensor '{}' has type {}, which cannot be dequantized", name,
                                   DTypeName(v.type)));
  }
  return v;
}

Result<const float*> WeightLoader::Vector(const std::string& name, int64_t n) const {
  COHORT_ASSIGN_OR_RETURN(TensorView v, Find(name, {n}));
  if (v.type != DType::kF32) {
    return Unsupported(fmt::format("tensor '{}' has type {}; vectors must be f32", name,
                                   DTypeName(v.type)));
  }
  return reinterpret_cast<const float*>(v.data);
}

Result<const float*> WeightLoader::OptionalVector(const std::string& name, int64_t n) const {
  if (!Has(name)) return static_cast<const float*>(nullptr);
  return Vector(name, n);
}

Result<OutputWeights> LoadOutputWeights(const WeightLoader& loader, const ModelConfig& c) {
  OutputWeights w;
  COHORT_ASSIGN_OR_RETURN(w.token_embd, loader.Table("token_embd.weight", {c.n_embd, c.n_vocab}));
  COHORT_ASSIGN_OR_RETURN(w.output_norm, loader.Vector("output_norm.weight", c.n_embd));
  if (c.tied_output) {
    COHORT_ASSIGN_OR_RETURN(w.output, loader.Matrix("token_embd.weight", {c.n_embd, c.n_vocab}));
  } else {
    COHORT_ASSIGN_OR_RETURN(w.output, loader.Matrix("output.weight", {c.n_embd, c.n_vocab}));
  }
  return w;
}

Result<GqaWeights> LoadGqaWeights(const WeightLoader& loader, const ModelConfig& c, int layer) {
  GqaWeights w;
  const int64_t q_width = static_cast<int64_t>(c.n_head) * c.head_dim_k;
  const int64_t k_width = static_cast<int64_t>(c.n_head_kv) * c.head_dim_k;
  const int64_t v_width = static_cast<int64_t>(c.n_head_kv) * c.head_dim_v;
  const int64_t o_width = static_cast<int64_t>(c.n_head) * c.head_dim_v;
  COHORT_ASSIGN_OR_RETURN(w.wq, loader.Matrix(WeightLoader::Blk(layer, "attn_q"), {c.n_embd, q_width}));
  COHORT_ASSIGN_OR_RETURN(w.wk, loader.Matrix(WeightLoader::Blk(layer, "attn_k"), {c.n_embd, k_width}));
  COHORT_ASSIGN_OR_RETURN(w.wv, loader.Matrix(WeightLoader::Blk(layer, "attn_v"), {c.n_embd, v_width}));
  COHORT_ASSIGN_OR_RETURN(w.wo, loader.Matrix(WeightLoader::Blk(layer, "attn_output"), {o_width, c.n_embd}));
  if (c.qkv_bias) {
    COHORT_ASSIGN_OR_RETURN(w.bq, loader.Vector(WeightLoader::Blk(layer, "attn_q", "bias"), q_width));
    COHORT_ASSIGN_OR_RETURN(w.bk, loader.Vector(WeightLoader::Blk(layer, "attn_k", "bias"), k_width));
    COHORT_ASSIGN_OR_RETURN(w.bv, loader.Vector(WeightLoader::Blk(layer, "attn_v", "bias"), v_width));
  }
  if (c.qk_norm) {
    COHORT_ASSIGN_OR_RETURN(w.q_norm, loader.Vector(WeightLoader::Blk(layer, "attn_q_norm"), c.head_dim_k));
    COHORT_ASSIGN_OR_RETURN(w.k_norm, loader.Vector(WeightLoader::Blk(layer, "attn_k_norm"), c.head_dim_k));
  }
  if (c.qk_norm_full) {
    COHORT_ASSIGN_OR_RETURN(w.q_norm_full, loader.Vector(WeightLoader::Blk(layer, "attn_q_norm"), q_width));
    COHORT_ASSIGN_OR_RETURN(w.k_norm_full, loader.Vector(WeightLoader::Blk(layer, "attn_k_norm"), k_width));
  }
  return w;
}

Result<DenseFfnWeights> LoadDenseFfn(const WeightLoader& loader, const ModelConfig& c, int layer,
                                     int64_t n_ff, const char* suffix) {
  DenseFfnWeights w;
  const std::string gate = fmt::format("ffn_gate{}", suffix);
  const std::string up = fmt::format("ffn_up{}", suffix);
  const std::string down = fmt::format("ffn_down{}", suffix);
  COHORT_ASSIGN_OR_RETURN(w.gate, loader.Matrix(WeightLoader::Blk(layer, gate.c_str()), {c.n_embd, n_ff}));
  COHORT_ASSIGN_OR_RETURN(w.up, loader.Matrix(WeightLoader::Blk(layer, up.c_str()), {c.n_embd, n_ff}));
  COHORT_ASSIGN_OR_RETURN(w.down, loader.Matrix(WeightLoader::Blk(layer, down.c_str()), {n_ff, c.n_embd}));
  return w;
}

Result<MoeWeights> LoadMoeWeights(const WeightLoader& loader, const ModelConfig& c, int layer) {
  MoeWeights w;
  const MoeConfig& m = c.moe;
  COHORT_ASSIGN_OR_RETURN(w.router, loader.Matrix(WeightLoader::Blk(layer, "ffn_gate_inp"), {c.n_embd, m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(w.selection_bias, loader.OptionalVector(WeightLoader::Blk(layer, "exp_probs_b", "bias"), m.n_expert));
  COHORT_ASSIGN_OR_RETURN(w.gate_exps, loader.Matrix(WeightLoader::Blk(layer, "ffn_gate_exps"), {c.n_embd, m.n_ff_expert, m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(w.up_exps, loader.Matrix(WeightLoader::Blk(layer, "ffn_up_exps"), {c.n_embd, m.n_ff_expert, m.n_expert}));
  COHORT_ASSIGN_OR_RETURN(w.down_exps, loader.Matrix(WeightLoader::Blk(layer, "ffn_down_exps"), {m.n_ff_expert, c.n_embd, m.n_expert}));
  if (m.n_expert_shared > 0) {
    COHORT_ASSIGN_OR_RETURN(DenseFfnWeights shared,
                            LoadDenseFfn(loader, c, layer,
                                         static_cast<int64_t>(m.n_ff_expert) * m.n_expert_shared,
                                         "_shexp"));
    w.shared = shared;
  }
  return w;
}

}  // namespace cohort::model
