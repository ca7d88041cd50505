// Float elementwise and row ops of the forward pass (RMSNorm, RoPE with YaRN, softmax, SiLU
// gating, adds), written as ggml's CPU backend computes them so results agree with llama.cpp.
// Scalar and simple on purpose: SIMD versions are checked against these later.
#pragma once

#include <cstdint>

namespace cohort::kernels {

// y = x / sqrt(mean(x^2) + eps) * w (w may be null: no gain). y may alias x. The sum of
// squares is taken in double, as ggml does.
void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y);

enum class RopeMode { kNorm, kNeox };  // rotate (x[2i], x[2i+1]) vs. (x[i], x[i + n_rot/2])

// Everything ggml_rope_ext takes besides the tensor and positions.
struct RopeParams {
  RopeMode mode = RopeMode::kNorm;
  int n_rot = 0;                  // rotated dimensions per head (even)
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;        // 1 / context-extension factor
  int n_ctx_orig = 0;             // YaRN: the training context before extension
  float ext_factor = 0.0f;        // YaRN: 0 disables the extrapolation mix
  float attn_factor = 1.0f;       // multiplies cos and sin
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  const float* freq_factors = nullptr;  // [n_rot/2] divisors of theta (Llama 3.1 rope_freqs)
};

// The YaRN correction range [low, high] in rotated-dimension units (ggml_rope_yarn_corr_dims).
void RopeYarnCorrDims(const RopeParams& p, float dims[2]);
// Fills cache[n_rot] with interleaved (cos, sin) for position pos: computed once per token
// and reused for every head.
void RopeCache(const RopeParams& p, int64_t pos, float* cache);
// Rotates the first n_rot values of x with a cache from RopeCache; the rest stay untouched.
void RopeApply(RopeMode mode, int n_rot, const float* cache, float* x);
// RopeCache + RopeApply over n_heads heads of x spaced head_stride floats apart.
void Rope(const RopeParams& p, int64_t pos, float* x, int n_heads, int64_t head_stride,
          float* cache);

// In-place softmax of x[0..n) (max-subtracted, sum in double). -inf entries become 0.
// Computed as ggml's AVX-512 CPU backend does, so that results agree to the last bit as often
// as possible: chunks of 16 use ExpPoly and a pairwise chunk sum, the remaining n % 16 values
// use libm's expf.
void Softmax(float* x, int64_t n);
// Softmax with an attention sink (gpt-oss): the sink logit joins the max and the denominator
// (its exp through libm, added after the others, as ggml_soft_max_ext) but gets no output.
void SoftmaxWithSink(float* x, int64_t n, float sink);
// exp(x) by the polynomial ggml's SIMD code uses (ggml_v_expf: range reduction by ln 2 and a
// degree-5 polynomial, within ~1.5 ulp of expf); 0 below and inf above the range.
float ExpPoly(float x);

float Silu(float x);  // x / (1 + expf(-x)), libm
float Sigmoid(float x);
// out[i] = silu(gate[i]) * up[i]; out may alias gate or up. As ggml: chunks of 16 take
// silu through ExpPoly, the n % 16 tail through libm.
void SwiGlu(const float* gate, const float* up, int64_t n, float* out);
// gpt-oss's clamped SwiGLU (ggml_swiglu_oai): g = min(gate, limit), u = clamp(up, -limit,
// limit), out = g * sigmoid(alpha * g) * (u + 1), with libm's expf; out may alias gate or up.
void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out);
// y[i] += x[i]
void Add(const float* x, int64_t n, float* y);
// y[i] *= s
void Scale(float s, int64_t n, float* y);
// y[i] += s * x[i]
void AddScaled(const float* x, float s, int64_t n, float* y);
// y[i] += s * x[i] for IEEE-half x (s * x rounded to float first, as AddScaled).
void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y);
// y[i] *= w[i]
void Mul(const float* w, int64_t n, float* y);
float Dot(const float* a, const float* b, int64_t n);
// Dot of IEEE-half a with float b.
float DotF16(const uint16_t* a, const float* b, int64_t n);
// scores[h * scores_stride + p] = DotF16(rows + p * row_stride, q + h * q_stride, n) * scale
// for p < n_rows, h < n_heads: queries against cached keys (several when the heads of a GQA
// group share them), bit-identical to those calls one by one.
void DotsF16Heads(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q, int64_t q_stride,
                  int n_heads, int64_t n, float scale, float* scores, int64_t scores_stride);
// For each head h < n_heads: out + h * out_stride [0..n) = 0, then AddScaledF16(rows + p *
// row_stride, w[h * w_stride + p], n, ...) for p = 0, 1, ..., n_rows - 1: attention's weighted
// sum of cached values, bit-identical to those calls.
void WeightedRowSumF16Heads(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                            int64_t row_stride, int64_t n_rows, int64_t n, float* out, int64_t out_stride);
// Index of the largest value; ties go to the lowest index.
int64_t Argmax(const float* x, int64_t n);

}  // namespace cohort::kernels
