// KV cache: per layer, per sequence slot, the keys and values of every position seen so far.
// Stored as F32 (exact, the golden setting) or F16 (half the memory, llama.cpp's default).
#pragma once

#include <cstdint>
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
  // Forget positions >= pos of the sequence (pos = 0 clears it).
  void Truncate(int seq, int pos);
  int64_t bytes() const;

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
};

}  // namespace cohort::model
