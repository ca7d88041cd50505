// DeltaNet; see delta_net.h. The sums follow llama.cpp's CPU kernels: the conv's dot product
// in plain float order (ggml_compute_forward_ssm_conv_f32), the state's dot products as
// ggml_vec_dot_f32 in llama.cpp's AVX2 build (DotAvx2Order), L2 norm as llama.cpp builds it (rms_norm with eps / n,
// then a 1/sqrt(n) scale), SiLU as ggml's vector SiLU.
#include "model/delta_net.h"

#include <cmath>

#include "core/check.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace cohort::model {
namespace {

// y = silu(x) in place, as ggml_vec_silu_f32: chunks through the SIMD exp, the tail libm.
void SiluRow(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    for (int64_t k = i; k < i + 16; ++k) x[k] = x[k] / (1.0f + kernels::ExpPoly(-x[k]));
  }
  for (; i < n; ++i) x[i] = kernels::Silu(x[i]);
}

// dot(a, b) as ggml_vec_dot_f32 sums it in an AVX2 build of llama.cpp (the build these
// goldens come from): 4 accumulators of 8 lanes fed by fused multiply-adds over steps of 32,
// reduced pairwise (acc0 + acc2, acc1 + acc3, then the two), the 8 lanes as the SSE
// hadd tree, then the n % 32 tail one product at a time.
float DotAvx2Order(const float* a, const float* b, int64_t n) {
  float acc[4][8] = {};
  const int64_t np = n / 32 * 32;
  for (int64_t i = 0; i < np; i += 32) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 8; ++l) acc[j][l] = std::fma(a[i + j * 8 + l], b[i + j * 8 + l], acc[j][l]);
    }
  }
  for (int l = 0; l < 8; ++l) {
    acc[0][l] += acc[2][l];
    acc[1][l] += acc[3][l];
  }
  for (int l = 0; l < 8; ++l) acc[0][l] += acc[1][l];
  float t0[4];
  for (int l = 0; l < 4; ++l) t0[l] = acc[0][l] + acc[0][l + 4];
  const float h0 = t0[0] + t0[1], h1 = t0[2] + t0[3];  // _mm_hadd_ps(t0, t0)
  float sum = h0 + h1;                                   // the second hadd
  for (int64_t i = np; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float Softplus(float x) { return x > 20.0f ? x : std::log(1.0f + std::exp(x)); }

// llama.cpp's build_gdn_l2_norm: rms_norm(x, eps / n) * (1 / sqrt(n)).
void L2Norm(float* x, int64_t n, float eps) {
  const float nf = static_cast<float>(n);
  kernels::RmsNorm(x, nullptr, n, eps / nf, x);
  kernels::Scale(1.0f / std::sqrt(nf), n, x);
}

}  // namespace

void DeltaNetStep(int64_t d, const float* q, const float* k, const float* v, float g, float beta,
                  float* state, float* o) {
  kernels::Scale(std::exp(g), d * d, state);
  float delta[1024];
  COHORT_CHECK_LE(d, 1024);
  for (int64_t j = 0; j < d; ++j) {
    delta[j] = (v[j] - DotAvx2Order(state + j * d, k, d)) * beta;
  }
  for (int64_t j = 0; j < d; ++j) {
    float* row = state + j * d;
    const float dj = delta[j];
    for (int64_t i = 0; i < d; ++i) row[i] = std::fma(k[i], dj, row[i]);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t j = 0; j < d; ++j) o[j] = DotAvx2Order(state + j * d, q, d) * scale;
}

void DeltaNet(const BlockEnv& env, const DeltaNetWeights& w, const HybridConfig& c, float eps,
              int state_layer, const float* x, RecurrentState& state, DeltaNetScratch& s,
              float* out) {
  const int n_tokens = env.n_tokens;
  const int64_t d = c.head_dim;
  const int64_t n_ch = c.conv_channels();
  const int64_t kw = c.key_width();
  const int64_t vw = c.value_width();
  const int n_k = c.conv_kernel;
  COHORT_CHECK_EQ(state.conv_floats(), DeltaNetConvFloats(c));
  COHORT_CHECK_EQ(state.delta_floats(), DeltaNetStateFloats(c));
  s.qkv.resize(static_cast<size_t>(n_tokens) * n_ch);
  s.conv.resize(static_cast<size_t>(n_tokens) * n_ch);
  s.z.resize(static_cast<size_t>(n_tokens) * vw);
  s.beta.resize(static_cast<size_t>(n_tokens) * c.v_heads);
  s.alpha.resize(static_cast<size_t>(n_tokens) * c.v_heads);
  s.o.resize(static_cast<size_t>(n_tokens) * vw);
  const kernels::MatMulProduct in[] = {{w.wqkv, x, n_tokens, s.qkv.data()},
                                       {w.wz, x, n_tokens, s.z.data()},
                                       {w.wbeta, x, n_tokens, s.beta.data()},
                                       {w.walpha, x, n_tokens, s.alpha.data()}};
  kernels::MatMulBatch(in, env.pool, env.matmul_scratch);

  // Causal conv1d per channel over [its kept inputs, this batch's inputs] of each sequence,
  // tokens in batch order; channels are independent, so threads take channel ranges.
  RunOnPool(env.pool, [&](int thread, int threads) {
    int64_t begin, end;
    SplitRange(n_ch, thread, threads, &begin, &end);
    for (int t = 0; t < n_tokens; ++t) {
      float* cs = state.Conv(state_layer, env.seq_ids[t]);
      for (int64_t ch = begin; ch < end; ++ch) {
        float* hist = cs + ch * (n_k - 1);
        const float* wk = w.conv + ch * n_k;
        const float now = s.qkv[t * n_ch + ch];
        float sum = 0.0f;
        for (int i = 0; i < n_k - 1; ++i) sum += hist[i] * wk[i];
        sum += now * wk[n_k - 1];
        s.conv[t * n_ch + ch] = sum;
        for (int i = 0; i + 1 < n_k - 1; ++i) hist[i] = hist[i + 1];
        hist[n_k - 2] = now;
      }
    }
  });
  for (int t = 0; t < n_tokens; ++t) {
    float* row = s.conv.data() + t * n_ch;
    SiluRow(row, n_ch);
    for (int h = 0; h < 2 * c.k_heads; ++h) L2Norm(row + h * d, d, eps);  // q heads, then k heads
    for (int h = 0; h < c.v_heads; ++h) {
      float& b = s.beta[t * c.v_heads + h];
      b = kernels::Sigmoid(b);
      float& g = s.alpha[t * c.v_heads + h];
      g = Softplus(g + w.dt_bias[h]) * w.a[h];
    }
  }

  // The recurrence: value heads are independent, tokens of a head run in batch order.
  RunOnPool(env.pool, [&](int thread, int threads) {
    int64_t begin, end;
    SplitRange(c.v_heads, thread, threads, &begin, &end);
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kh = h % c.k_heads;
      for (int t = 0; t < n_tokens; ++t) {
        const float* row = s.conv.data() + t * n_ch;
        float* st = state.Delta(state_layer, env.seq_ids[t]) + h * d * d;
        DeltaNetStep(d, row + kh * d, row + kw + kh * d, row + 2 * kw + h * d,
                     s.alpha[t * c.v_heads + h], s.beta[t * c.v_heads + h], st,
                     s.o.data() + t * vw + h * d);
      }
    }
  });

  // Gated RMSNorm per head, then the output projection.
  for (int t = 0; t < n_tokens; ++t) {
    for (int h = 0; h < c.v_heads; ++h) {
      float* o = s.o.data() + t * vw + h * d;
      kernels::RmsNorm(o, w.norm, d, eps, o);
      kernels::SwiGlu(s.z.data() + t * vw + h * d, o, d, o);
    }
  }
  kernels::MatMul(w.wout, s.o.data(), n_tokens, out, env.pool, env.matmul_scratch);
}

}  // namespace cohort::model
