// Decoder: the forward pass shared by every architecture here: embedding, then per layer
// x += attention(rmsnorm(x)) and x += ffn(rmsnorm(x)), then the final norm and the LM head on
// the rows that want logits. An architecture supplies its attention and FFN blocks and weights.
// The layer loop keeps each block's output separate from the residual add, which is where a
// tensor-parallel executor all-reduces the partial sums.
#pragma once

#include <memory>
#include <span>
#include <variant>
#include <vector>

#include "model/block_env.h"
#include "model/dense_ffn.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/owned_slices.h"
#include "model/weights.h"

namespace cohort::model {

// A layer's FFN is dense or mixture-of-experts (DeepSeek's first layers are dense).
using FfnWeights = std::variant<DenseFfnWeights, MoeWeights>;

// The part of each layer this model instance computes; all of it for a single rank.
struct LayerShard {
  HeadRange heads;
  ColumnRange ffn_cols;     // dense FFN columns
  ExpertRange experts;      // routed experts
  // Columns (intermediate features) of every routed expert in `experts`: a rank splits the
  // routed experts either whole (experts) or by columns (expert_cols), not both at once.
  ColumnRange expert_cols;
  ColumnRange shared_cols;  // shared-expert columns
};
LayerShard FullShard(const ModelConfig& c);

// Where a distributed executor joins the partial sums of a tensor-parallel group: the decoder
// calls Reduce after each attention and each FFN block when its shard is not the whole layer.
// (model knows nothing of transports; parallel implements this over comm.)
class PartialSumReducer {
 public:
  virtual ~PartialSumReducer() = default;
  // Replaces data by its element-wise sum over the group; identical on every rank.
  virtual Status Reduce(std::span<float> data) = 0;
};

// Which layers and which slice of each one this instance computes (parallel::Executor sets
// it from a ShardPlan); the default is everything.
struct StageShard {
  LayerShard layer;
  int layer_begin = 0;
  int layer_end = 0;  // exclusive
};

class Decoder : public Model {
 public:
  const ModelConfig& config() const override { return config_; }
  Result<std::unique_ptr<KvCache>> NewKvCache(const KvCacheOptions& options) const override;
  Status Forward(const Context& ctx, const Batch& batch, KvCache& cache,
                 std::span<float> logits) override;
  Status ForwardHidden(const Context& ctx, const Batch& batch, KvCache& cache,
                       std::span<float> hidden) override;

  // --- Pieces of Forward for a distributed executor (Forward is their composition). ---
  // Restricts this instance to a shard; call before NewKvCache, whose caches then hold only
  // the shard's layers and KV heads. Checks the ranges against the config.
  Status SetStageShard(const StageShard& shard);
  const StageShard& stage_shard() const { return stage_; }
  // Checks a batch against the cache (positions, vocabulary, context) as Forward does.
  Status CheckStageBatch(const Batch& batch, const KvCache& cache);
  // x[n_tokens][n_embd] = embedding rows of the batch's tokens that fall in
  // [row_begin, row_end), zero for the others (a vocabulary-split embedding is then summed).
  void EmbedRows(const Batch& batch, int64_t row_begin, int64_t row_end, float* x);
  // Runs the shard's layers over x[n_tokens][n_embd] in place, reducing each block's partial
  // output with `reducer` (null: the shard must be whole layers).
  Status RunLayers(const Context& ctx, const Batch& batch, KvCache& cache, float* x,
                   PartialSumReducer* reducer);
  // logits[n_logits][row_end - row_begin] = LM-head rows [row_begin, row_end) for the tokens
  // that want logits, from the final hidden states x[n_tokens][n_embd].
  void HeadRows(const Batch& batch, ThreadPool* pool, const float* x, int64_t row_begin,
                int64_t row_end, float* logits);
  // out[n_logits][n_embd] = the output norm of the rows of x[n_tokens][n_embd] that want
  // logits (the hidden states ForwardHidden gives); returns their count.
  int NormOutputRows(const Batch& batch, const float* x, float* out);
  // Copies the stage shard's slices out of the mapping into memory of their own
  // (owned_slices.h): column slices (attention output, FFN down projections) and row slices
  // (q/k/v heads, FFN gate/up columns, experts, and the vocabulary rows [embd_*) of the
  // embedding and [out_*) of the LM head; empty ranges: unused here), releasing the mapped
  // pages, so the rank's resident memory is its share. Call after SetStageShard; returns
  // the bytes copied.
  Result<int64_t> CopyShardWeights(int64_t embd_begin, int64_t embd_end, int64_t out_begin,
                                   int64_t out_end);
  // Moves every weight matrix into one region of memory of its own, on huge pages where the
  // kernel gives them: packed (kernels/pack.h) where the kernels read its type faster so,
  // copied as it is otherwise. Releases the mapped pages, so resident memory stays about the
  // file's size. For a model that runs whole in this process; returns the bytes copied.
  Result<int64_t> PackWeights() override;

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

  // The weights a shard slices by columns, for CopyColumnSlices (null: none in that layer).
  virtual TensorView* MutableAttnOutput(int /*layer*/) { return nullptr; }
  virtual ColumnRange AttnOutputColumns() const { return {}; }
  virtual FfnWeights* MutableFfn(int /*layer*/) { return nullptr; }
  // Copies the layer's attention row slices for CopyShardWeights (default: leaves them mapped).
  virtual Status CopyAttentionRows(int /*layer*/, OwnedSlices& /*owned*/) { return Status::Ok(); }
  // The layer's attention input projections, for PackWeights (default: none).
  virtual std::vector<TensorView*> MutableAttnInputs(int /*layer*/) { return {}; }

  const LayerShard& shard() const { return stage_.layer; }
  // The KV-cache layer index of a model layer (caches hold the stage's layers only).
  int CacheLayer(int layer) const { return layer - stage_.layer_begin; }

 private:
  // Checks the batch, and that `out_size` floats hold its rows of `row_width` (logits or hidden states).
  Status CheckBatch(const Batch& batch, const KvCache& cache, size_t out_size, int64_t row_width);

  void RunFfn(const BlockEnv& env, int layer, const float* x, float* out);
  // x_ = the batch's embedding run through every layer (Forward and ForwardHidden, one rank).
  Status RunWhole(const Context& ctx, const Batch& batch, KvCache& cache);
  Status CopyFfnSlices(FfnWeights& ffn);
  Status CopyVocabRows(int64_t embd_begin, int64_t embd_end, int64_t out_begin, int64_t out_end);

  ModelConfig config_;
  OutputWeights output_;
  StageShard stage_;
  OwnedSlices owned_;  // CopyColumnSlices' copies, which the views then point into
  // Scratch, grown to the largest batch seen and then reused: no allocation per token.
  std::vector<float> x_, xn_, block_out_, head_in_;  // [n_tokens][n_embd]
  std::vector<uint8_t> matmul_scratch_;
  std::vector<uint8_t> embd_row_;  // one embedding row unpacked from a packed tied head
  std::vector<int> next_pos_;  // [n_seq] next expected position, for CheckBatch
  DenseFfnScratch ffn_scratch_;
  MoeScratch moe_scratch_;
};

}  // namespace cohort::model
