// KvCache storage: one flat buffer per K and V, indexed [layer][seq][pos][width], so the rows of
// one (layer, sequence) are contiguous and attention can stream them in position order.
#include "model/kv_cache.h"

#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "core/fp16.h"

namespace cohort::model {

Status KvCacheOptions::Validate() const {
  if (n_ctx <= 0) return InvalidArgument(fmt::format("kv cache: n_ctx {} must be positive", n_ctx));
  if (n_seq <= 0) return InvalidArgument(fmt::format("kv cache: n_seq {} must be positive", n_seq));
  if (type != DType::kF32 && type != DType::kF16) {
    return InvalidArgument(fmt::format("kv cache: type {} is not supported (f32, f16 are)",
                                       DTypeName(type)));
  }
  return Status::Ok();
}

KvCache::KvCache(const KvCacheOptions& options, int n_layer, int64_t k_width, int64_t v_width)
    : options_(options),
      n_layer_(n_layer),
      k_width_(k_width),
      v_width_(v_width),
      elem_bytes_(options.type == DType::kF16 ? 2 : 4),
      lengths_(options.n_seq, 0) {
  COHORT_CHECK(options.Validate().ok());
  COHORT_CHECK_GT(n_layer, 0);
  COHORT_CHECK_GT(k_width, 0);
  COHORT_CHECK_GE(v_width, 0);  // 0: values live inside the key rows (MLA)
  const size_t rows = static_cast<size_t>(n_layer) * options.n_seq * options.n_ctx;
  k_.assign(rows * k_width * elem_bytes_, 0);
  v_.assign(rows * v_width * elem_bytes_, 0);
}

size_t KvCache::Offset(int layer, int seq, int pos, int64_t width) const {
  COHORT_CHECK(layer >= 0 && layer < n_layer_);
  COHORT_CHECK(seq >= 0 && seq < options_.n_seq);
  COHORT_CHECK(pos >= 0 && pos < options_.n_ctx);
  const size_t row = (static_cast<size_t>(layer) * options_.n_seq + seq) * options_.n_ctx + pos;
  return row * width * elem_bytes_;
}

namespace {

void StoreRow(const float* src, int64_t n, DType type, uint8_t* dst) {
  if (type == DType::kF32) {
    std::memcpy(dst, src, n * sizeof(float));
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
  const auto* half = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(half[i]);
}

}  // namespace

void KvCache::Store(int layer, int seq, int pos, const float* k, const float* v) {
  StoreRow(k, k_width_, type(), k_.data() + Offset(layer, seq, pos, k_width_));
  if (v_width_ > 0) StoreRow(v, v_width_, type(), v_.data() + Offset(layer, seq, pos, v_width_));
  if (pos + 1 > lengths_[seq]) lengths_[seq] = pos + 1;
}

void KvCache::LoadK(int layer, int seq, int pos, float* out) const {
  LoadRow(KRow(layer, seq, pos), k_width_, type(), out);
}

void KvCache::LoadV(int layer, int seq, int pos, float* out) const {
  LoadRow(VRow(layer, seq, pos), v_width_, type(), out);
}

const uint8_t* KvCache::KRow(int layer, int seq, int pos) const {
  return k_.data() + Offset(layer, seq, pos, k_width_);
}

const uint8_t* KvCache::VRow(int layer, int seq, int pos) const {
  COHORT_CHECK_GT(v_width_, 0);
  return v_.data() + Offset(layer, seq, pos, v_width_);
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

}  // namespace cohort::model
