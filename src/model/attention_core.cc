// AttendOne: scores, softmax and the value sum for one (token, head) query.
#include "model/attention_core.h"

#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/ops.h"

namespace cohort::model {

namespace {

// The masked scores (-inf, before the window) and the softmax, with the head's sink if any.
void MaskedSoftmax(float* scores, int n_pos, int n_padded, const AttendMask& mask, int head) {
  for (int p = 0; p < mask.first_pos; ++p) scores[p] = -std::numeric_limits<float>::infinity();
  for (int p = n_pos; p < n_padded; ++p) scores[p] = -std::numeric_limits<float>::infinity();
  if (mask.sinks != nullptr) {
    kernels::SoftmaxWithSink(scores, n_padded, mask.sinks[head]);
  } else {
    kernels::Softmax(scores, n_padded);
  }
}

}  // namespace

void AttendOne(const float* q, int64_t dk, CacheRows k, CacheRows v, int64_t dv, int n_pos,
               float scale, float* scores, float* out, kernels::SumOrder order, AttendMask mask) {
  COHORT_CHECK_GT(n_pos, 0);
  COHORT_CHECK(mask.first_pos >= 0 && mask.first_pos < n_pos);
  if (k.type == DType::kF16) {
    COHORT_CHECK_EQ(k.stride_bytes % 2, 0);
    kernels::DotsF16Heads(reinterpret_cast<const uint16_t*>(k.data), k.stride_bytes / 2, n_pos, q, dk, 1, dk, scale,
                          scores, n_pos);
  } else {
    for (int p = mask.first_pos; p < n_pos; ++p) {
      const uint8_t* row = k.data + p * k.stride_bytes;
      scores[p] = kernels::DotGgml(reinterpret_cast<const float*>(row), q, dk) * scale;
    }
  }
  const int n_padded = ScoresStride(n_pos);
  MaskedSoftmax(scores, n_pos, n_padded, mask, 0);
  if (v.type == DType::kF32) {
    // llama.cpp's padded cache cells beyond n_pos hold zero weight and zero values, so they
    // add exact zeros to every lane: summing n_pos rows gives the same bits.
    COHORT_CHECK_EQ(v.stride_bytes % static_cast<int64_t>(sizeof(float)), 0);
    kernels::WeightedRowSum(scores, reinterpret_cast<const float*>(v.data),
                            v.stride_bytes / static_cast<int64_t>(sizeof(float)), n_pos, dv, order, out);
    return;
  }
  if (v.type == DType::kF16) {
    COHORT_CHECK_EQ(v.stride_bytes % 2, 0);
    kernels::WeightedRowSumF16Heads(scores, n_pos, 1, reinterpret_cast<const uint16_t*>(v.data), v.stride_bytes / 2,
                                    n_pos, dv, out, dv);
    return;
  }
  std::memset(out, 0, dv * sizeof(float));
  for (int p = 0; p < n_pos; ++p) {
    kernels::AddScaled(reinterpret_cast<const float*>(v.data + p * v.stride_bytes), scores[p], dv, out);
  }
}

void AttendHeads(const float* q, int64_t q_stride, int n_heads, int64_t dk, CacheRows k, CacheRows v,
                 int64_t dv, int n_pos, float scale, float* scores, float* out, int64_t out_stride,
                 kernels::SumOrder order, AttendMask mask) {
  COHORT_CHECK_GT(n_pos, 0);
  const int n_padded = ScoresStride(n_pos);
  if (k.type != DType::kF16 || v.type != DType::kF16) {
    for (int h = 0; h < n_heads; ++h) {
      const AttendMask head_mask{mask.first_pos, mask.sinks != nullptr ? mask.sinks + h : nullptr};
      AttendOne(q + h * q_stride, dk, k, v, dv, n_pos, scale, scores + h * n_padded, out + h * out_stride, order,
                head_mask);
    }
    return;
  }
  COHORT_CHECK_EQ(k.stride_bytes % 2, 0);
  COHORT_CHECK_EQ(v.stride_bytes % 2, 0);
  kernels::DotsF16Heads(reinterpret_cast<const uint16_t*>(k.data), k.stride_bytes / 2, n_pos, q, q_stride, n_heads,
                        dk, scale, scores, n_padded);
  for (int h = 0; h < n_heads; ++h) MaskedSoftmax(scores + h * n_padded, n_pos, n_padded, mask, h);
  kernels::WeightedRowSumF16Heads(scores, n_padded, n_heads, reinterpret_cast<const uint16_t*>(v.data),
                                  v.stride_bytes / 2, n_pos, dv, out, out_stride);
}

}  // namespace cohort::model
