// KV cache: per layer, per sequence slot, the keys and values of every position seen so far.
// Stored as F32 (exact, the golden setting), F16 (half the memory, llama.cpp's default) or
// Q8_0 (blocks of 32 values with an F16 scale, 34 bytes: llama.cpp's -ctk q8_0 -ctv q8_0, a
// little over half of F16; rows are quantized on store as ggml's CPU backend quantizes them).
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
  DType type = DType::kF32;  // kF32, kF16 or kQ8_0
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
  // One sequence's state as raw bytes, SeqBytes() of them, in the state's own layout: a prefix
  // cache keeps a copy as the checkpoint of a position and puts it back into any slot bit for
  // bit (engine/prefix_cache.h).
  virtual int64_t SeqBytes() const = 0;
  virtual void ReadSeq(int seq, uint8_t* dst) const = 0;
  virtual void WriteSeq(int seq, const uint8_t* src) = 0;
};

class KvCache {
 public:
  // n_layer layers; per position a key row of k_width and a value row of v_width floats
  // (for Q8_0 both multiples of 32, the block size, so every head's slice is whole blocks).
  KvCache(const KvCacheOptions& options, int n_layer, int64_t k_width, int64_t v_width);
  // Ok when a cache of these widths can hold `options.type` (Q8_0: whole blocks per row).
  static Status CheckWidths(const KvCacheOptions& options, int64_t k_width, int64_t v_width);

  const KvCacheOptions& options() const { return options_; }
  int n_ctx() const { return options_.n_ctx; }
  int n_seq() const { return options_.n_seq; }
  int64_t k_width() const { return k_width_; }
  int64_t v_width() const { return v_width_; }
  DType type() const { return options_.type; }
  // Bytes of one position's key (value) row, and of the first n elements of one (a head's
  // offset into the row): RowBytes(type(), n).
  int64_t k_row_bytes() const { return k_row_bytes_; }
  int64_t v_row_bytes() const { return v_row_bytes_; }
  int64_t ElementsBytes(int64_t n) const { return RowBytes(options_.type, n); }

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

  // Raw copies of whole positions, every layer's key and value rows, in the cache's own type
  // (a prefix cache keeps them and puts them back into any slot bit for bit). A run of n
  // positions takes RowsBytes(n) bytes laid out [layer][k rows of n][v rows of n].
  int64_t RowsBytes(int n) const;
  // Copies positions [pos, pos + n) of seq, all below length(seq), into dst.
  void ReadRows(int seq, int pos, int n, uint8_t* dst) const;
  // Writes positions [pos, pos + n) of seq from src (ReadRows' layout), pos <= length(seq);
  // the sequence's length grows to at least pos + n.
  void WriteRows(int seq, int pos, int n, const uint8_t* src);

 private:
  size_t Offset(int layer, int seq, int pos, int64_t row_bytes) const;

  KvCacheOptions options_;
  int n_layer_;
  int64_t k_width_;
  int64_t v_width_;
  int64_t k_row_bytes_;
  int64_t v_row_bytes_;
  std::vector<uint8_t> k_;  // [layer][seq][pos][k_width]
  std::vector<uint8_t> v_;  // [layer][seq][pos][v_width]
  std::vector<int> lengths_;
  std::unique_ptr<SequenceState> state_;
};

}  // namespace cohort::model
