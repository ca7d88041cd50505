// The core of attention for one query: softmax(scale * q·k_p) over the cached positions p,
// then the weighted sum of the value rows. Keys and values are read in place from the KV cache
// (F32, F16 or Q8_0); the same routine serves GQA heads and MLA's latent "single KV head".
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/ggml_sums.h"

namespace cohort::model {

// Rows of a cache region: row p starts at data + p * stride_bytes and holds `type` elements.
struct CacheRows {
  const uint8_t* data = nullptr;
  int64_t stride_bytes = 0;
  DType type = DType::kF32;
};

// llama.cpp's softmax rows span the whole padded cache (a multiple of 256 cells, masked
// cells at -inf), so every value goes through the 16-wide path; scores are padded likewise.
constexpr int kScorePad = 16;
inline int ScoresStride(int n_ctx) { return (n_ctx + kScorePad - 1) / kScorePad * kScorePad; }

// out[0..dv) = sum_p softmax_p(scale * dot(q, k_p[0..dk))) * v_p[0..dv), p in [0, n_pos).
// scores must hold ScoresStride(n_pos) floats. With an F32 cache the sums follow llama.cpp's
// CPU backend: scores as ggml_vec_dot_f32, the value sum as `order` says (kSgemm when the
// query's batch has >= 2 tokens, kVecDot for a token alone).
// llama.cpp multiplies the attention weights by the values with sgemm when its batch holds
// >= 2 tokens and with ggml_vec_dot_f32 for a single token.
inline kernels::SumOrder BatchSumOrder(int n_tokens) {
  return n_tokens >= 2 ? kernels::SumOrder::kSgemm : kernels::SumOrder::kVecDot;
}

// What a query sees beyond causality (gpt-oss): positions before first_pos are masked (a
// sliding window: -inf scores, zero weights, exactly as llama.cpp's masked cells), and sinks,
// when not null, give each head h a logit sinks[h] in its softmax's denominator.
struct AttendMask {
  int first_pos = 0;
  const float* sinks = nullptr;  // [n_heads] of the call (AttendHeads: its heads in order)
};

// llama.cpp rotates attention into a Walsh-Hadamard basis when its KV cache is quantized
// (llama_kv_cache's attn_rot_k / attn_rot_v, on unless LLAMA_ATTN_ROT_DISABLE is set): an
// orthonormal rotation spreads an outlier over a whole block, so Q8_0's per-block scale loses
// less. Queries and keys (after RoPE) go through the k-point transform, values through the
// v-point one before they are stored, and the attention output through the v-point one again
// (H * H = I) before the output projection; the scores are unchanged but for rounding.
// k is the largest power of two (>= 64) dividing the key head width, v is 64; either is 0
// (no rotation) for an unquantized cache or a head width that is not a multiple of 64.
struct KvRotation {
  int k = 0;
  int v = 0;
};
KvRotation KvRotationFor(DType cache_type, int64_t head_dim_k, int64_t head_dim_v);

// Applies the orthonormal n-point Walsh-Hadamard transform (Sylvester order) to each of the
// n_elems / n consecutive chunks of x, in place; n == 0 leaves x as it is. Bit for bit ggml's
// CPU kernel for a mul_mat tagged GGML_HINT_SRC0_IS_HADAMARD: each value times 1/sqrtf(n),
// then the butterflies (u + v, u - v) at spans 1, 2, 4, ... n/2.
void RotateHadamard(float* x, int64_t n_elems, int n);

void AttendOne(const float* q, int64_t dk, CacheRows k, CacheRows v, int64_t dv, int n_pos,
               float scale, float* scores, float* out,
               kernels::SumOrder order = kernels::SumOrder::kVecDot, AttendMask mask = {});

// AttendOne for n_heads queries that share k and v (the heads of a GQA group): head h's query
// at q + h * q_stride, its output at out + h * out_stride; scores holds n_heads rows of
// ScoresStride(n_pos) floats. Each head's result is AttendOne's, bit for bit; an F16 cache
// reads each key and value row once for all the heads.
void AttendHeads(const float* q, int64_t q_stride, int n_heads, int64_t dk, CacheRows k, CacheRows v,
                 int64_t dv, int n_pos, float scale, float* scores, float* out, int64_t out_stride,
                 kernels::SumOrder order = kernels::SumOrder::kVecDot, AttendMask mask = {});

}  // namespace cohort::model
