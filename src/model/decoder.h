// Decoder: the forward pass shared by every architecture here: embedding, then per layer
// x += attention(rmsnorm(x)) and x += ffn(rmsnorm(x)), then the final norm and the LM head on
// the rows that want logits. An architecture supplies its attention and FFN blocks and weights.
// The layer loop keeps each block's output separate from the residual add, which is where a
// tensor-parallel executor all-reduces the partial sums.
#pragma once

#include <memory>
#include <variant>
#include <vector>

#include "model/block_env.h"
#include "model/dense_ffn.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/weights.h"

namespace cohort::model {

// A layer's FFN is dense or mixture-of-experts (DeepSeek's first layers are dense).
using FfnWeights = std::variant<DenseFfnWeights, MoeWeights>;

// The part of each layer this model instance computes; all of it for a single rank.
struct LayerShard {
  HeadRange heads;
  ColumnRange ffn_cols;     // dense FFN columns
  ExpertRange experts;      // routed experts
  ColumnRange shared_cols;  // shared-expert columns
};
LayerShard FullShard(const ModelConfig& c);

class Decoder : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  Result<std::unique_ptr<KvCache>> NewKvCache(const KvCacheOptions& options) const override;
  Status Forward(const Context& ctx, const Batch& batch, KvCache& cache,
                 std::span<float> logits) override;

 protected:
  Decoder(ModelConfig config, OutputWeights output);

  // Widths of one position's cache rows (v may be 0 when values live inside the key rows).
  virtual int64_t KvKeyWidth() const = 0;
  virtual int64_t KvValueWidth() const = 0;
  virtual const float* AttnNorm(int layer) const = 0;
  virtual const float* FfnNorm(int layer) const = 0;
  // out[n_tokens][n_embd] = attention of layer over normalised x (partial for a shard).
  virtual void Attention(const BlockEnv& env, int layer, const float* x, KvCache& cache,
                         float* out) = 0;
  virtual const FfnWeights& Ffn(int layer) const = 0;

  const LayerShard& shard() const { return shard_; }

 private:
  Status CheckBatch(const Batch& batch, const KvCache& cache, size_t logits_size);
  void Embed(const Batch& batch);
  void RunFfn(const BlockEnv& env, int layer, const float* x, float* out);
  void Head(const Batch& batch, ThreadPool* pool, float* logits);

  ModelConfig config_;
  OutputWeights output_;
  LayerShard shard_;
  // Scratch, grown to the largest batch seen and then reused: no allocation per token.
  std::vector<float> x_, xn_, block_out_, head_in_;  // [n_tokens][n_embd]
  std::vector<uint8_t> matmul_scratch_;
  std::vector<int> next_pos_;  // [n_seq] next expected position, for CheckBatch
  DenseFfnScratch ffn_scratch_;
  MoeScratch moe_scratch_;
};

}  // namespace cohort::model
