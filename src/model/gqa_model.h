// GqaModel: a decoder whose layers are GQA attention plus a dense or MoE FFN: the layout of
// llama, qwen2, qwen3 and qwen3moe. Each of those architectures is a small loader (llama.cc,
// qwen2.cc, qwen3.cc, qwen3moe.cc) that fills GqaLayer structs from its tensor names.
#pragma once

#include <memory>
#include <vector>

#include "model/decoder.h"
#include "model/gqa_attention.h"

namespace cohort::model {

struct GqaLayer {
  const float* attn_norm = nullptr;  // [n_embd]
  GqaWeights attn;
  const float* ffn_norm = nullptr;   // [n_embd] (gpt-oss: post_attention_norm)
  FfnWeights ffn;
  bool sliding = false;              // attends a window of config n_swa positions (gpt-oss)
};

class GqaModel final : public Decoder {
 public:
  // rope_freqs: optional [n_rot/2] frequency divisors (Llama 3.1 long-context), else null.
  GqaModel(ModelConfig config, OutputWeights output, std::vector<GqaLayer> layers,
           const float* rope_freqs);

 protected:
  int64_t KvKeyWidth() const override;
  int64_t KvValueWidth() const override;
  const float* AttnNorm(int layer) const override { return layers_[layer].attn_norm; }
  const float* FfnNorm(int layer) const override { return layers_[layer].ffn_norm; }
  void Attention(const BlockEnv& env, int layer, const float* x, KvCache& cache,
                 float* out) override;
  const FfnWeights& Ffn(int layer) const override { return layers_[layer].ffn; }
  TensorView* MutableAttnOutput(int layer) override { return &layers_[layer].attn.wo; }
  std::vector<TensorView*> MutableAttnInputs(int layer) override {
    GqaWeights& a = layers_[layer].attn;
    return {&a.wq, &a.wk, &a.wv};
  }
  ColumnRange AttnOutputColumns() const override;
  FfnWeights* MutableFfn(int layer) override { return &layers_[layer].ffn; }
  Status CopyAttentionRows(int layer, OwnedSlices& owned) override;

 private:
  std::vector<GqaLayer> layers_;
  GqaParams params_;
  GqaParams params_swa_;  // params_ for the sliding-window layers
  GqaScratch scratch_;
};

// RopeParams for a config (the kernel's view of ModelConfig::rope).
kernels::RopeParams MakeRopeParams(const ModelConfig& c, const float* freq_factors);

// Loads the per-layer norms, GQA attention and FFN (dense, or MoE when the config has experts)
// named the llama.cpp way; the architecture's own flags (biases, q/k norm) come from the config.
Result<std::unique_ptr<Model>> LoadGqaModel(const gguf::File& file, const ModelConfig& c);

}  // namespace cohort::model
