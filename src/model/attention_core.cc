// AttendOne: scores, softmax and the value sum for one (token, head) query.
#include "model/attention_core.h"

#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/ops.h"

namespace cohort::model {

void AttendOne(const float* q, int64_t dk, CacheRows k, CacheRows v, int64_t dv, int n_pos,
               float scale, float* scores, float* out, kernels::SumOrder order) {
  COHORT_CHECK_GT(n_pos, 0);
  const bool half = k.type == DType::kF16;
  for (int p = 0; p < n_pos; ++p) {
    const uint8_t* row = k.data + p * k.stride_bytes;
    const float dot = half ? kernels::DotF16(reinterpret_cast<const uint16_t*>(row), q, dk)
                           : kernels::DotGgml(reinterpret_cast<const float*>(row), q, dk);
    scores[p] = dot * scale;
  }
  const int n_padded = ScoresStride(n_pos);
  for (int p = n_pos; p < n_padded; ++p) scores[p] = -std::numeric_limits<float>::infinity();
  kernels::Softmax(scores, n_padded);
  if (v.type == DType::kF32) {
    // llama.cpp's padded cache cells beyond n_pos hold zero weight and zero values, so they
    // add exact zeros to every lane: summing n_pos rows gives the same bits.
    COHORT_CHECK_EQ(v.stride_bytes % static_cast<int64_t>(sizeof(float)), 0);
    kernels::WeightedRowSum(scores, reinterpret_cast<const float*>(v.data),
                            v.stride_bytes / static_cast<int64_t>(sizeof(float)), n_pos, dv, order, out);
    return;
  }
  std::memset(out, 0, dv * sizeof(float));
  for (int p = 0; p < n_pos; ++p) {
    const uint8_t* row = v.data + p * v.stride_bytes;
    const float w = scores[p];
    if (v.type == DType::kF16) {
      kernels::AddScaledF16(reinterpret_cast<const uint16_t*>(row), w, dv, out);
    } else {
      kernels::AddScaled(reinterpret_cast<const float*>(row), w, dv, out);
    }
  }
}

}  // namespace cohort::model
