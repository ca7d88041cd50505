// The scalar reference for MXFP4 rows (GGML type 39, gpt-oss's expert weights): dequantize,
// quantize (ggml's quantize_row_mxfp4_ref: exponent from the block's largest magnitude, each
// value to the nearest e2m1 level) and the dot product with a Q8_0 activation row in the
// order of ggml's generic ggml_vec_dot_mxfp4_q8_0 (per block: the two integer half sums, one
// float product, a running float sum).
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace cohort::kernels::ref {
namespace {

// The index of the e2m1 level nearest x / scale (scale = half the block scale; the table holds
// doubled values); the first of equally near levels wins, as in ggml's best_index_mxfp4.
int NearestMxfp4(float x, float half_scale) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Values[0] * half_scale - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Values[i] * half_scale - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

void DequantizeMxfp4Row(const void* src, float* dst, int64_t n) {
  COHORT_CHECK_EQ(n % kQK, 0);
  const auto* x = static_cast<const BlockMxfp4*>(src);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Mxfp4HalfScale(x[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[i * kQK + j] = kMxfp4Values[x[i].qs[j] & 0x0f] * d;
      dst[i * kQK + j + kQK / 2] = kMxfp4Values[x[i].qs[j] >> 4] * d;
    }
  }
}

void QuantizeMxfp4Row(const float* src, void* dst, int64_t n) {
  COHORT_CHECK_EQ(n % kQK, 0);
  auto* y = static_cast<BlockMxfp4*>(dst);
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float* x = src + i * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    // The largest level (6 = 1.5 * 2^2) lands near amax: exponent floor(log2 amax) - 2. ggml
    // casts the float straight to uint8_t; clamping keeps extreme magnitudes defined.
    float e = amax > 0.0f ? std::floor(std::log2(amax)) - 2.0f + 127.0f : 0.0f;
    e = std::min(255.0f, std::max(0.0f, e));
    y[i].e = static_cast<uint8_t>(e);
    const float d = Mxfp4HalfScale(y[i].e);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = NearestMxfp4(x[j], d);
      const int hi = NearestMxfp4(x[j + kQK / 2], d);
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

float VecDotMxfp4Q8_0(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockMxfp4*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float sum = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const float d = Fp16ToFp32(y[i].d) * Mxfp4HalfScale(x[i].e);
    int sum_lo = 0, sum_hi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sum_lo += y[i].qs[j] * kMxfp4Values[x[i].qs[j] & 0x0f];
      sum_hi += y[i].qs[j + kQK / 2] * kMxfp4Values[x[i].qs[j] >> 4];
    }
    sum += d * static_cast<float>(sum_lo + sum_hi);
  }
  return sum;
}

float VecDotMxfp4Q8_0Repacked(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const BlockMxfp4*>(w);
  const auto* y = static_cast<const BlockQ8_0*>(a);
  float acc = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sum += y[i].qs[j] * kMxfp4Values[x[i].qs[j] & 0x0f];
      sum += y[i].qs[j + kQK / 2] * kMxfp4Values[x[i].qs[j] >> 4];
    }
    acc = std::fma(static_cast<float>(sum), Mxfp4HalfScale(x[i].e) * Fp16ToFp32(y[i].d), acc);
  }
  return acc;
}

}  // namespace cohort::kernels::ref
