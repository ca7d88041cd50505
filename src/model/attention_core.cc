// AttendOne: scores, softmax and the value sum for one (token, head) query.
#include "model/attention_core.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "core/check.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace cohort::model {

namespace {

// A Q8_0 cache as llama.cpp reads one: it runs a quantized cache only with flash attention,
// whose CPU kernel (ggml_compute_forward_flash_attn_ext_f16_one_chunk) quantizes the query to
// Q8_0 (K's vec-dot type), takes each score with the Q8_0 x Q8_0 vec-dot, and folds the value
// rows, dequantized to floats, into an online softmax: a running maximum M, the sum S of
// exp(score - M), and the weighted sum rescaled whenever M grows; the result is divided by S at
// the end. The rows and the query are in the rotated basis KvRotation describes (the callers
// rotate them). ggml's value update is a fused multiply-add per lane; AddScaled rounds the product
// first, so the two agree to rounding (the Q8_0 tolerance is far wider).
void AttendQ8_0(const float* q, int64_t dk, CacheRows k, CacheRows v, int64_t dv, int n_pos, float scale,
                float* out, int first_pos, const float* sink) {
  constexpr int64_t kMaxWidth = 1024;
  COHORT_CHECK(dk % 32 == 0 && dk <= kMaxWidth);
  COHORT_CHECK(dv % 32 == 0 && dv <= kMaxWidth);
  COHORT_CHECK(v.type == DType::kQ8_0);
  alignas(64) uint8_t q_q8[kMaxWidth / 32 * 34];
  alignas(64) float v_row[kMaxWidth];
  kernels::QuantizeRow(DType::kQ8_0, q, q_q8, dk);
  const kernels::VecDotFn dot = kernels::GetVecDot(DType::kQ8_0, kernels::BestSimdLevel());
  // Positions before first_pos are masked out (ggml skips cells whose mask is -inf).
  float m = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  std::memset(out, 0, dv * sizeof(float));
  for (int p = first_pos; p < n_pos; ++p) {
    const float s = dot(k.data + p * k.stride_bytes, q_q8, dk) * scale;
    float ms = 1.0f;  // rescales the sums when s is the new maximum
    float vs = 1.0f;  // exp(s - m)
    if (s > m) {
      const float m_old = m;
      m = s;
      ms = std::exp(m_old - m);
      kernels::Scale(ms, dv, out);
    } else {
      vs = std::exp(s - m);
    }
    kernels::DequantizeRow(DType::kQ8_0, v.data + p * v.stride_bytes, v_row, dv);
    kernels::AddScaled(v_row, vs, dv, out);
    sum = sum * ms + vs;
  }
  // A sink (gpt-oss) is one more logit whose value row is zero; ggml folds it in after the
  // cached positions, as one more step of the online softmax.
  if (sink != nullptr) {
    float ms = 1.0f;
    float vs = 1.0f;
    if (*sink > m) {
      ms = std::exp(m - *sink);
      m = *sink;
      kernels::Scale(ms, dv, out);
    } else {
      vs = std::exp(*sink - m);
    }
    sum = sum * ms + vs;
  }
  kernels::Scale(sum == 0.0f ? 0.0f : 1.0f / sum, dv, out);
}

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

KvRotation KvRotationFor(DType cache_type, int64_t head_dim_k, int64_t head_dim_v) {
  KvRotation r;
  if (!Traits(cache_type).quantized) return r;
  if (head_dim_k > 0 && head_dim_k % 64 == 0) {
    r.k = 64;
    while (head_dim_k % (2 * r.k) == 0) r.k *= 2;
  }
  if (head_dim_v > 0 && head_dim_v % 64 == 0) r.v = 64;
  return r;
}

void RotateHadamard(float* x, int64_t n_elems, int n) {
  if (n == 0) return;
  COHORT_CHECK(n > 0 && (n & (n - 1)) == 0 && n_elems % n == 0);
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t c = 0; c < n_elems; c += n) {
    float* y = x + c;
    for (int i = 0; i < n; ++i) y[i] *= scale;
    // Each butterfly rounds once (u + v, u - v), whatever order or lanes take them, so this
    // equals ggml's SIMD passes exactly.
    for (int len = 1; len < n; len *= 2) {
      for (int i = 0; i < n; i += 2 * len) {
        for (int j = i; j < i + len; ++j) {
          const float u = y[j];
          const float v = y[j + len];
          y[j] = u + v;
          y[j + len] = u - v;
        }
      }
    }
  }
}

void AttendOne(const float* q, int64_t dk, CacheRows k, CacheRows v, int64_t dv, int n_pos,
               float scale, float* scores, float* out, kernels::SumOrder order, AttendMask mask) {
  COHORT_CHECK_GT(n_pos, 0);
  COHORT_CHECK(mask.first_pos >= 0 && mask.first_pos < n_pos);
  if (k.type == DType::kQ8_0) {
    AttendQ8_0(q, dk, k, v, dv, n_pos, scale, out, mask.first_pos, mask.sinks);
    return;
  }
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
