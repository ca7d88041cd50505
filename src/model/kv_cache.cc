// KvCache storage: one flat buffer per K and V, indexed [layer][seq][pos][width], so the rows of
// one (layer, sequence) are contiguous and attention can stream them in position order.
#include "model/kv_cache.h"

#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant.h"

namespace cohort::model {

Status KvCacheOptions::Validate() const {
  if (n_ctx <= 0) return InvalidArgument(fmt::format("kv cache: n_ctx {} must be positive", n_ctx));
  if (n_seq <= 0) return InvalidArgument(fmt::format("kv cache: n_seq {} must be positive", n_seq));
  if (type != DType::kF32 && type != DType::kF16 && type != DType::kQ8_0) {
    return InvalidArgument(fmt::format("kv cache: type {} is not supported (f32, f16, q8_0 are)",
                                       DTypeName(type)));
  }
  return Status::Ok();
}

Status KvCache::CheckWidths(const KvCacheOptions& options, int64_t k_width, int64_t v_width) {
  if (options.type == DType::kQ8_0 && (k_width % 32 != 0 || v_width % 32 != 0)) {
    return InvalidArgument(fmt::format("kv cache: q8_0 needs rows of whole 32-value blocks; this model's are {} and {}",
                                       k_width, v_width));
  }
  return Status::Ok();
}

KvCache::KvCache(const KvCacheOptions& options, int n_layer, int64_t k_width, int64_t v_width)
    : options_(options),
      n_layer_(n_layer),
      k_width_(k_width),
      v_width_(v_width),
      k_row_bytes_(0),
      v_row_bytes_(0),
      lengths_(options.n_seq, 0) {
  COHORT_CHECK(options.Validate().ok());
  COHORT_CHECK_GT(n_layer, 0);
  COHORT_CHECK_GT(k_width, 0);
  COHORT_CHECK_GE(v_width, 0);  // 0: values live inside the key rows (MLA)
  if (options.type == DType::kQ8_0) {
    COHORT_CHECK_EQ(k_width % 32, 0);
    COHORT_CHECK_EQ(v_width % 32, 0);
  }
  k_row_bytes_ = RowBytes(options.type, k_width);
  v_row_bytes_ = RowBytes(options.type, v_width);
  const size_t rows = static_cast<size_t>(n_layer) * options.n_seq * options.n_ctx;
  k_.assign(rows * k_row_bytes_, 0);
  v_.assign(rows * v_row_bytes_, 0);
}

size_t KvCache::Offset(int layer, int seq, int pos, int64_t row_bytes) const {
  COHORT_CHECK(layer >= 0 && layer < n_layer_);
  COHORT_CHECK(seq >= 0 && seq < options_.n_seq);
  COHORT_CHECK(pos >= 0 && pos < options_.n_ctx);
  const size_t row = (static_cast<size_t>(layer) * options_.n_seq + seq) * options_.n_ctx + pos;
  return row * row_bytes;
}

namespace {

// Q8_0 rows go through the kernels' quantizer, bit-exact with ggml's CPU backend's, which is
// what llama.cpp's KV store (set_rows into a q8_0 cache) runs.
void StoreRow(const float* src, int64_t n, DType type, uint8_t* dst) {
  if (type == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  if (type == DType::kQ8_0) {
    kernels::QuantizeRow(type, src, dst, n);
    return;
  }
  auto* half = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) half[i] = Fp32ToFp16(src[i]);
}

void LoadRow(const uint8_t* src, int64_t n, DType type, float* dst) {
  if (type == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
    return;
  }
  if (type == DType::kQ8_0) {
    kernels::DequantizeRow(type, src, dst, n);
    return;
  }
  const auto* half = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(half[i]);
}

}  // namespace

void KvCache::Store(int layer, int seq, int pos, const float* k, const float* v) {
  StoreRow(k, k_width_, type(), k_.data() + Offset(layer, seq, pos, k_row_bytes_));
  if (v_width_ > 0) StoreRow(v, v_width_, type(), v_.data() + Offset(layer, seq, pos, v_row_bytes_));
  if (pos + 1 > lengths_[seq]) lengths_[seq] = pos + 1;
}

void KvCache::LoadK(int layer, int seq, int pos, float* out) const {
  LoadRow(KRow(layer, seq, pos), k_width_, type(), out);
}

void KvCache::LoadV(int layer, int seq, int pos, float* out) const {
  LoadRow(VRow(layer, seq, pos), v_width_, type(), out);
}

const uint8_t* KvCache::KRow(int layer, int seq, int pos) const {
  return k_.data() + Offset(layer, seq, pos, k_row_bytes_);
}

const uint8_t* KvCache::VRow(int layer, int seq, int pos) const {
  COHORT_CHECK_GT(v_width_, 0);
  return v_.data() + Offset(layer, seq, pos, v_row_bytes_);
}

void KvCache::Truncate(int seq, int pos) {
  COHORT_CHECK(seq >= 0 && seq < options_.n_seq);
  COHORT_CHECK_GE(pos, 0);
  if (state_ != nullptr) {
    if (pos == 0 || pos < lengths_[seq]) {
      lengths_[seq] = 0;
      state_->Reset(seq);
    }
    return;
  }
  if (pos < lengths_[seq]) lengths_[seq] = pos;
}

int64_t KvCache::bytes() const {
  return static_cast<int64_t>(k_.size() + v_.size()) + (state_ != nullptr ? state_->bytes() : 0);
}

int64_t KvCache::RowsBytes(int n) const {
  COHORT_CHECK_GE(n, 0);
  return static_cast<int64_t>(n_layer_) * n * (k_row_bytes_ + v_row_bytes_);
}

void KvCache::ReadRows(int seq, int pos, int n, uint8_t* dst) const {
  COHORT_CHECK(seq >= 0 && seq < options_.n_seq);
  COHORT_CHECK(pos >= 0 && n >= 0 && pos + n <= lengths_[seq]);
  if (n == 0) return;
  const size_t k_run = static_cast<size_t>(n) * k_row_bytes_;
  const size_t v_run = static_cast<size_t>(n) * v_row_bytes_;
  for (int layer = 0; layer < n_layer_; ++layer) {
    std::memcpy(dst, k_.data() + Offset(layer, seq, pos, k_row_bytes_), k_run);
    dst += k_run;
    if (v_run > 0) std::memcpy(dst, v_.data() + Offset(layer, seq, pos, v_row_bytes_), v_run);
    dst += v_run;
  }
}

void KvCache::WriteRows(int seq, int pos, int n, const uint8_t* src) {
  COHORT_CHECK(seq >= 0 && seq < options_.n_seq);
  COHORT_CHECK(pos >= 0 && n >= 0 && pos <= lengths_[seq] && pos + n <= options_.n_ctx);
  if (n == 0) return;
  const size_t k_run = static_cast<size_t>(n) * k_row_bytes_;
  const size_t v_run = static_cast<size_t>(n) * v_row_bytes_;
  for (int layer = 0; layer < n_layer_; ++layer) {
    std::memcpy(k_.data() + Offset(layer, seq, pos, k_row_bytes_), src, k_run);
    src += k_run;
    if (v_run > 0) std::memcpy(v_.data() + Offset(layer, seq, pos, v_row_bytes_), src, v_run);
    src += v_run;
  }
  if (pos + n > lengths_[seq]) lengths_[seq] = pos + n;
}

}  // namespace cohort::model
