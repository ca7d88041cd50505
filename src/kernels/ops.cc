// Float ops; see ops.h. An op with SIMD forms dispatches here, by the level the kernels run at
// (BestSimdLevel), to its AVX-512 or AVX2 form or to its scalar reference (ref:: in
// ops_internal.h), which also lives here. Accumulation orders and float/double choices follow
// ggml's CPU code where they affect the last bits (RMSNorm sum in double, RoPE theta by
// repeated product).
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/ops_internal.h"
#include "kernels/quant.h"

namespace cohort::kernels {
namespace {
// Which forms of the ops run. The attention loops call these per cached position: take the
// AVX-512 or AVX2 versions at those levels (ops_avx512.cc and ops_avx2.cc keep the scalar
// arithmetic). AVX-VNNI is AVX2 for float ops.
enum class Path { kScalar, kAvx2, kAvx512 };

Path OpsPath() {
#if defined(__x86_64__) || defined(__i386__)
  const SimdLevel level = BestSimdLevel();
  if (HasAvx512(level)) return Path::kAvx512;
  if (HasAvx2(level)) return Path::kAvx2;
#endif
  return Path::kScalar;
}
}  // namespace

void RmsNorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  COHORT_CHECK_GT(n, 0);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] *= w[i];
  }
}

namespace {

float YarnCorrDim(int n_rot, int n_ctx_orig, float n_rotations, float base) {
  return static_cast<float>(n_rot) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rotations * 2.0f * std::numbers::pi_v<float>)) /
         (2.0f * std::log(base));
}

float YarnRamp(float low, float high, int64_t i0) {
  const float y = (static_cast<float>(i0 / 2) - low) / std::max(0.001f, high - low);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

}  // namespace

void RopeYarnCorrDims(const RopeParams& p, float dims[2]) {
  const float start = std::floor(YarnCorrDim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
  const float end = std::ceil(YarnCorrDim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(p.n_rot - 1), end);
}

void RopeCache(const RopeParams& p, int64_t pos, float* cache) {
  COHORT_CHECK(p.n_rot > 0 && p.n_rot % 2 == 0);
  float corr_dims[2] = {0.0f, 0.0f};
  if (p.ext_factor != 0.0f) RopeYarnCorrDims(p, corr_dims);
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  // theta is advanced by repeated multiplication, as ggml does, so the angles agree bitwise.
  float theta = static_cast<float>(pos);
  for (int64_t i0 = 0; i0 < p.n_rot; i0 += 2) {
    const float ff = p.freq_factors != nullptr ? p.freq_factors[i0 / 2] : 1.0f;
    const float theta_extrap = theta / ff;
    const float theta_interp = p.freq_scale * theta_extrap;
    float angle = theta_interp;
    float mscale = p.attn_factor;
    if (p.ext_factor != 0.0f) {
      const float ramp_mix = YarnRamp(corr_dims[0], corr_dims[1], i0) * p.ext_factor;
      angle = theta_interp * (1.0f - ramp_mix) + theta_extrap * ramp_mix;
      mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    cache[i0] = std::cos(angle) * mscale;
    cache[i0 + 1] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

void RopeApply(RopeMode mode, int n_rot, const float* cache, float* x) {
  // ggml's rotate_pairs is built with -march=native and GCC's default FP contraction: of each
  // output's two products the first is fused, the second rounded. NORM pairs adjacent values;
  // NEOX pairs value i with value i + n_rot/2.
  const int64_t offset = mode == RopeMode::kNorm ? 1 : n_rot / 2;
  for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
    const int64_t ic = mode == RopeMode::kNorm ? i0 : i0 / 2;
    const float c = cache[i0];
    const float s = cache[i0 + 1];
    const float x0 = x[ic];
    const float x1 = x[ic + offset];
    x[ic] = std::fma(x0, c, -(x1 * s));
    x[ic + offset] = std::fma(x0, s, x1 * c);
  }
}

void Rope(const RopeParams& p, int64_t pos, float* x, int n_heads, int64_t head_stride,
          float* cache) {
  RopeCache(p, pos, cache);
  for (int h = 0; h < n_heads; ++h) RopeApply(p.mode, p.n_rot, cache, x + h * head_stride);
}

float ExpPoly(float x) {
  // exp(x) = 2^n * exp(b) with n = round(x / ln 2) (via the 1.5 * 2^23 shifter) and b the
  // remainder, reduced with a two-part ln 2; exp(b) by a degree-5 polynomial.
  constexpr float kShifter = 0x1.8p23f;
  const float z = std::fma(x, 0x1.715476p+0f, kShifter);
  const float n = z - kShifter;
  if (std::fabs(n) > 192.0f || std::isnan(n)) return n <= 0.0f ? 0.0f : INFINITY;
  const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
  const float u = b * b;
  const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u,
                                    std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                           u, std::fma(0x1.ffffecp-1f, b, 1.0f));
  return std::ldexp(j, static_cast<int>(n));
}

namespace {

// The one body of Softmax and ref::Softmax: on a SIMD path the max and the 16-value chunks
// come from ops_avx512.cc or ops_avx2.cc, whose arithmetic is the scalar loops' own.
// `sink` (null: none) is an extra logit in the denominator only, as ggml_soft_max_ext's sinks.
void SoftmaxImpl(float* x, int64_t n, Path path, const float* sink = nullptr) {
  COHORT_CHECK_GT(n, 0);
  float max = -std::numeric_limits<float>::infinity();
  if (path == Path::kAvx512) {
    max = avx512::Max(x, n);
  } else if (path == Path::kAvx2) {
    max = avx2::Max(x, n);
  } else {
    for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  }
  if (sink != nullptr) max = std::max(max, *sink);
  COHORT_CHECK(max > -std::numeric_limits<float>::infinity());
  double sum = 0.0;
  int64_t i = 0;
  if (path != Path::kScalar) {
    sum = path == Path::kAvx512 ? avx512::ExpChunks(x, n / 16, max) : avx2::ExpChunks(x, n / 16, max);
    i = n / 16 * 16;
  }
  for (; i + 15 < n; i += 16) {
    float v[16];
    for (int k = 0; k < 16; ++k) v[k] = x[i + k] = ExpPoly(x[i + k] - max);
    // The pairwise order of a 16-lane horizontal add: halves, quarters, pairs.
    for (int k = 0; k < 8; ++k) v[k] += v[k + 8];
    for (int k = 0; k < 4; ++k) v[k] += v[k + 4];
    v[0] += v[2];
    v[1] += v[3];
    sum += static_cast<double>(v[0] + v[1]);
  }
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += static_cast<double>(x[i]);
  }
  if (sink != nullptr) sum += static_cast<double>(std::exp(*sink - max));
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t k = 0; k < n; ++k) x[k] *= inv;
}

// The one body of SwiGlu and ref::SwiGlu; `path` as for SoftmaxImpl.
void SwiGluImpl(const float* gate, const float* up, int64_t n, float* out, Path path) {
  int64_t i = 0;
  if (path != Path::kScalar) {
    if (path == Path::kAvx512) {
      avx512::SwiGluChunks(gate, up, n / 16, out);
    } else {
      avx2::SwiGluChunks(gate, up, n / 16, out);
    }
    i = n / 16 * 16;
  }
  for (; i + 15 < n; i += 16) {
    for (int64_t k = i; k < i + 16; ++k) out[k] = gate[k] / (1.0f + ExpPoly(-gate[k])) * up[k];
  }
  for (; i < n; ++i) out[i] = Silu(gate[i]) * up[i];
}

}  // namespace

namespace ref {

void Softmax(float* x, int64_t n) { SoftmaxImpl(x, n, Path::kScalar); }

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) { SwiGluImpl(gate, up, n, out, Path::kScalar); }

void AddScaled(const float* x, float s, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * x[i];
}

void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += s * Fp16ToFp32(x[i]);
}

// sum a[i] * b[i] in double, in the AVX2 kernel's order (ops_avx2.cc, DotDoubleLanes), so
// that the scalar and AVX2 levels give the same bits: 16 values a step into 4 accumulators of
// 4 lanes, the rest 4 at a time into the first, the accumulators added (0 + 1) + (2 + 3),
// then the 4 lanes in turn. Double accumulation keeps long dot products (attention over
// thousands of positions) within float rounding of the exact value.
template <typename Load>
float DotDoubleLanes(Load a, const float* b, int64_t n) {
  double acc[4][4] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 4; ++l) {
        const int64_t e = i + 4 * k + l;
        acc[k][l] = std::fma(a(e), static_cast<double>(b[e]), acc[k][l]);
      }
    }
  }
  for (; i < n; i += 4) {  // the last step zero-padded, as the kernel's masked load
    for (int l = 0; l < 4; ++l) {
      const bool in = i + l < n;
      acc[0][l] = std::fma(in ? a(i + l) : 0.0, in ? static_cast<double>(b[i + l]) : 0.0, acc[0][l]);
    }
  }
  double sum = 0.0;
  for (int l = 0; l < 4; ++l) sum += (acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]);
  return static_cast<float>(sum);
}

float Dot(const float* a, const float* b, int64_t n) {
  return DotDoubleLanes([a](int64_t i) { return static_cast<double>(a[i]); }, b, n);
}

float DotF16(const uint16_t* a, const float* b, int64_t n) {
  return DotDoubleLanes([a](int64_t i) { return static_cast<double>(Fp16ToFp32(a[i])); }, b, n);
}

}  // namespace ref

void Softmax(float* x, int64_t n) { SoftmaxImpl(x, n, OpsPath()); }

void SoftmaxWithSink(float* x, int64_t n, float sink) { SoftmaxImpl(x, n, OpsPath(), &sink); }

void SwiGluOai(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(alpha * (-g))) * (u + 1.0f);
  }
}

float Silu(float x) { return x / (1.0f + std::exp(-x)); }
float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void SwiGlu(const float* gate, const float* up, int64_t n, float* out) { SwiGluImpl(gate, up, n, out, OpsPath()); }

void Add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void Scale(float s, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

void AddScaled(const float* x, float s, int64_t n, float* y) {
  switch (OpsPath()) {
    case Path::kAvx512: return avx512::AddScaled(x, s, n, y);
    case Path::kAvx2: return avx2::AddScaled(x, s, n, y);
    case Path::kScalar: return ref::AddScaled(x, s, n, y);
  }
}

void Mul(const float* w, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= w[i];
}

float Dot(const float* a, const float* b, int64_t n) {
  switch (OpsPath()) {
    case Path::kAvx512: return avx512::Dot(a, b, n);
    case Path::kAvx2: return avx2::Dot(a, b, n);
    case Path::kScalar: break;
  }
  return ref::Dot(a, b, n);
}

float DotF16(const uint16_t* a, const float* b, int64_t n) {
  switch (OpsPath()) {
    case Path::kAvx512: return avx512::DotF16(a, b, n);
    case Path::kAvx2: return avx2::DotF16(a, b, n);
    case Path::kScalar: break;
  }
  return ref::DotF16(a, b, n);
}

void AddScaledF16(const uint16_t* x, float s, int64_t n, float* y) {
  switch (OpsPath()) {
    case Path::kAvx512: return avx512::AddScaledF16(x, s, n, y);
    case Path::kAvx2: return avx2::AddScaledF16(x, s, n, y);
    case Path::kScalar: return ref::AddScaledF16(x, s, n, y);
  }
}

void DotsF16Heads(const uint16_t* rows, int64_t row_stride, int64_t n_rows, const float* q, int64_t q_stride,
                  int n_heads, int64_t n, float scale, float* scores, int64_t scores_stride) {
  switch (OpsPath()) {
    case Path::kAvx512:
      return avx512::DotsF16Heads(rows, row_stride, n_rows, q, q_stride, n_heads, n, scale, scores, scores_stride);
    case Path::kAvx2:
      return avx2::DotsF16Heads(rows, row_stride, n_rows, q, q_stride, n_heads, n, scale, scores, scores_stride);
    case Path::kScalar: break;
  }
  for (int h = 0; h < n_heads; ++h) {
    for (int64_t p = 0; p < n_rows; ++p) {
      scores[h * scores_stride + p] = DotF16(rows + p * row_stride, q + h * q_stride, n) * scale;
    }
  }
}

void WeightedRowSumF16Heads(const float* w, int64_t w_stride, int n_heads, const uint16_t* rows,
                            int64_t row_stride, int64_t n_rows, int64_t n, float* out, int64_t out_stride) {
  switch (OpsPath()) {
    case Path::kAvx512:
      return avx512::WeightedRowSumF16Heads(w, w_stride, n_heads, rows, row_stride, n_rows, n, out, out_stride);
    case Path::kAvx2:
      return avx2::WeightedRowSumF16Heads(w, w_stride, n_heads, rows, row_stride, n_rows, n, out, out_stride);
    case Path::kScalar: break;
  }
  for (int h = 0; h < n_heads; ++h) {
    float* o = out + h * out_stride;
    std::fill(o, o + n, 0.0f);
    for (int64_t p = 0; p < n_rows; ++p) AddScaledF16(rows + p * row_stride, w[h * w_stride + p], n, o);
  }
}

int64_t Argmax(const float* x, int64_t n) {
  COHORT_CHECK_GT(n, 0);
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (x[i] > x[best]) best = i;
  }
  return best;
}

}  // namespace cohort::kernels
