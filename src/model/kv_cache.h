// KV cache: per layer, per sequence slot, the keys and values of every position seen so far.
// Stored as F32 (exact, the golden setting) or F16 (half the memory, llama.cpp's default).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace cohort::model {

struct KvCacheOptions {
  int n_ctx = 0;       // positions per sequence slot (0: the model's training context)
  int n_seq = 1;       // sequence slots
  DType type = DType::kF32;  // kF32 or kF16
  Status Validate() const;
};

// Per-sequence memory a model keeps beside the KV rows (a recurrent layer's state, which
// summarises every position seen and cannot be rewound to an earlier one). Owned by the
// cache, so it is sized, reset and freed with the slots.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual void Reset(int seq) = 0;  // the state of an empty sequence
  virtual int64_t bytes() const = 0;
};

class KvCache {
 public:
  // n_layer layers; per position a key row of k_width and a value row of v_width floats.
  KvCache(const KvCacheOptions& options, int n_layer, int64_t k_width, int64_t v_width);

  const KvCacheOptions& options() const { return options_; }
  int n_ctx() const { return options_.n_ctx; }
  int n_seq() const { return options_.n_seq; }
  int64_t k_width() const { return k_width_; }
  int64_t v_width() const { return v_width_; }
  DType type() const { return options_.type; }

  // Writes one position's key and value rows (floats, converted to the cache type).
  void Store(int layer, int seq, int pos, const float* k, const float* v);
  // Reads position rows back as floats.
  void LoadK(int layer, int seq, int pos, float* out) const;
  void LoadV(int layer, int seq, int pos, float* out) const;
  // Raw row pointers (type() elements) for kernels that read the cache in place.
  const uint8_t* KRow(int layer, int seq, int pos) const;
  const uint8_t* VRow(int layer, int seq, int pos) const;

  // Number of positions filled for the sequence (one past the highest stored position).
  int length(int seq) const { return lengths_[seq]; }
  // Forget positions >= pos of the sequence (pos = 0 clears it). With a SequenceState, which
  // cannot forget part of what it has seen, any truncation below length(seq) clears the whole
  // sequence (length(seq) is then 0): a caller keeping a prefix checks length() afterwards.
  void Truncate(int seq, int pos);
  int64_t bytes() const;  // KV rows plus the sequence state

  // The model's per-sequence state (null: none); set once by the model that made the cache.
  void SetSequenceState(std::unique_ptr<SequenceState> state) { state_ = std::move(state); }
  SequenceState* sequence_state() const { return state_.get(); }

 private:
  size_t Offset(int layer, int seq, int pos, int64_t width) const;

  KvCacheOptions options_;
  int n_layer_;
  int64_t k_width_;
  int64_t v_width_;
  int64_t elem_bytes_;
  std::vector<uint8_t> k_;  // [layer][seq][pos][k_width]
  std::vector<uint8_t> v_;  // [layer][seq][pos][v_width]
  std::vector<int> lengths_;
  std::unique_ptr<SequenceState> state_;
};

}  // namespace cohort::model
