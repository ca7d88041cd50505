// WeightLoader: finds a model's tensors in a GGUF by name and checks each one's shape against
// what the config implies and its type against what the kernels accept, so a mismatched file
// fails Load with a message naming the tensor, never later with a crash. Also the loaders of
// weight groups that several architectures share.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/config.h"
#include "model/dense_ffn.h"
#include "model/gqa_attention.h"
#include "model/moe_ffn.h"

namespace cohort::gguf {
class File;
}

namespace cohort::model {

class WeightLoader {
 public:
  explicit WeightLoader(const gguf::File& file) : file_(file) {}

  // A weight of exactly shape ne (ggml order) that kernels::MatMul accepts.
  Result<TensorView> Matrix(const std::string& name, std::vector<int64_t> ne) const;
  // The same, or an empty view when the file has no such tensor.
  Result<TensorView> OptionalMatrix(const std::string& name, std::vector<int64_t> ne) const;
  // A table read row by row with kernels::DequantizeRow (the token embedding).
  Result<TensorView> Table(const std::string& name, std::vector<int64_t> ne) const;
  // An F32 vector of n values (norm gains, biases), borrowed from the mapping.
  Result<const float*> Vector(const std::string& name, int64_t n) const;
  // The same, or nullptr when absent.
  Result<const float*> OptionalVector(const std::string& name, int64_t n) const;
  bool Has(const std::string& name) const;

  // "blk.<layer>.<what>.weight" (or .bias etc. via suffix).
  static std::string Blk(int layer, const char* what, const char* suffix = "weight");

 private:
  Result<TensorView> Find(const std::string& name, const std::vector<int64_t>& ne) const;
  const gguf::File& file_;
};

// token_embd, output_norm and the LM head (token_embd itself when the model is tied).
struct OutputWeights {
  TensorView token_embd;              // [n_embd, n_vocab]
  const float* output_norm = nullptr; // [n_embd]
  TensorView output;                  // [n_embd] -> [n_vocab]
};
Result<OutputWeights> LoadOutputWeights(const WeightLoader& loader, const ModelConfig& c);

// attn_q/k/v/output of a GQA layer; biases and q/k norms when the config says so.
Result<GqaWeights> LoadGqaWeights(const WeightLoader& loader, const ModelConfig& c, int layer);
// ffn_gate/up/down<suffix> of width n_ff ("" for the dense FFN, "_shexp" for shared experts).
Result<DenseFfnWeights> LoadDenseFfn(const WeightLoader& loader, const ModelConfig& c, int layer,
                                     int64_t n_ff, const char* suffix);
// Router, experts, optional exp_probs_b and shared experts of an MoE layer.
Result<MoeWeights> LoadMoeWeights(const WeightLoader& loader, const ModelConfig& c, int layer);

}  // namespace cohort::model
