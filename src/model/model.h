// Model: the weights of one model (views into the mapped GGUF) and its forward pass over a
// batch of tokens from one or more sequences, each reading and extending its KV cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/context.h"
#include "core/status.h"
#include "model/config.h"
#include "model/kv_cache.h"

namespace cohort::gguf {
class File;
}

namespace cohort::model {

// Tokens to evaluate together. Token i sits at positions[i] of sequence seq_ids[i] and sees
// that sequence's cache entries at positions < positions[i], plus earlier tokens of the same
// sequence in this batch. Logits are produced for the tokens with want_logits[i] set, in order.
struct Batch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_ids;
  std::vector<uint8_t> want_logits;

  void Add(int32_t token, int32_t position, int32_t seq_id, bool logits) {
    tokens.push_back(token);
    positions.push_back(position);
    seq_ids.push_back(seq_id);
    want_logits.push_back(logits ? 1 : 0);
  }
  size_t size() const { return tokens.size(); }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq_ids.clear();
    want_logits.clear();
  }
  int n_logits() const;
};

class Model {
 public:
  virtual ~Model() = default;
  // Builds the model for file's architecture. `file` must outlive the model; weights are
  // views into its mapping (no copy).
  static Result<std::unique_ptr<Model>> Load(const gguf::File& file);

  virtual const ModelConfig& config() const = 0;
  // A KV cache shaped for this model.
  virtual Result<std::unique_ptr<KvCache>> NewKvCache(const KvCacheOptions& options) const = 0;
  // Runs the batch; writes batch.n_logits() rows of config().n_vocab floats into logits.
  virtual Status Forward(const Context& ctx, const Batch& batch, KvCache& cache,
                         std::span<float> logits) = 0;
  // Runs the batch as Forward does, but writes the final hidden states (after the output
  // norm, before the LM head: llama.cpp's embeddings) of the tokens with want_logits set,
  // batch.n_logits() rows of config().n_embd floats.
  virtual Status ForwardHidden(const Context& ctx, const Batch& batch, KvCache& cache,
                               std::span<float> hidden) = 0;
  // For a model that runs whole in this process: copies the weight matrices into memory of
  // its own (on huge pages; packed where the matmul kernels read their type faster so,
  // kernels/pack.h), releasing their mapped pages. Returns the bytes copied (0: none).
  virtual Result<int64_t> PackWeights() { return int64_t{0}; }
};

}  // namespace cohort::model
