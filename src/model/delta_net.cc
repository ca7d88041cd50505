// DeltaNet; see delta_net.h. The sums follow llama.cpp's CPU kernels: the conv's dot product
// in plain float order (ggml_compute_forward_ssm_conv_f32), the state's dot products as
// ggml_vec_dot_f32 in llama.cpp's AVX2 build (DotAvx2Order), L2 norm as llama.cpp builds it (rms_norm with eps / n,
// then a 1/sqrt(n) scale), SiLU as ggml's vector SiLU.
#include "model/delta_net.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

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

HeadRange DeltaNetHeadsOf(const ModelConfig& c, HeadRange attn_heads) {
  const int64_t k = c.ssm.k_heads, n = c.n_head;
  return {static_cast<int>(attn_heads.begin * k / n), static_cast<int>(attn_heads.end * k / n)};
}

namespace {

// Where a rank's share of a DeltaNet layer sits in the whole layer. Locally the share is a
// DeltaNet of n_k key heads and v_per_k * n_k value heads in the same layout (local value
// head j * n_k + i is global head j * k_heads + kb + i, and reads local key head i).
struct DeltaShare {
  int64_t d, kw, n_k, kb, k_all, v_per_k;  // kw: the whole layer's key width
  int64_t local_kw() const { return n_k * d; }
  int64_t local_vw() const { return v_per_k * n_k * d; }
  int64_t local_channels() const { return 2 * local_kw() + local_vw(); }
  int64_t local_v_heads() const { return v_per_k * n_k; }
  // The global value head (or its first channel / column, times d) of a local one.
  int64_t GlobalVHead(int64_t h) const { return h / n_k * k_all + kb + h % n_k; }
  int64_t GlobalChannel(int64_t ch) const {
    if (ch < 2 * local_kw()) return ch / local_kw() * kw + kb * d + ch % local_kw();
    const int64_t v = ch - 2 * local_kw();
    return 2 * kw + GlobalVHead(v / d) * d + v % d;
  }
  // Output projection pieces: one when the share is every head (the columns in order), else
  // one per j (value heads j * k_heads + [kb, kb + n_k), adjacent columns).
  int64_t n_pieces() const { return n_k == k_all ? 1 : v_per_k; }
};

// The in-projections of a share: rows of wqkv (q, k, then v in v_per_k runs), wz, wbeta and
// walpha, each run computed into s.proj and copied to its place in the local rows.
void InProjections(const BlockEnv& env, const DeltaNetWeights& w, const DeltaShare& sh,
                   const float* x, DeltaNetScratch& s) {
  struct Run {
    const TensorView* w = nullptr;
    int64_t row = 0, n = 0;   // rows [row, row + n) of w
    float* dst = nullptr;     // token 0's first value
    int64_t dst_stride = 0;   // floats between tokens
  };
  const int n_tokens = env.n_tokens;
  const int64_t d = sh.d, n_ch = sh.local_channels(), vw = sh.local_vw(), nv = sh.local_v_heads();
  // At most 2 + 4 * v_per_k runs, which the products' limit bounds (no allocation per call).
  std::array<Run, kernels::kMaxMatMulProducts> runs;
  size_t n_runs = 0;
  auto add = [&](const Run& r) {
    COHORT_CHECK_LT(n_runs, runs.size());
    runs[n_runs++] = r;
  };
  add({&w.wqkv, sh.kb * d, sh.local_kw(), s.qkv.data(), n_ch});
  add({&w.wqkv, sh.kw + sh.kb * d, sh.local_kw(), s.qkv.data() + sh.local_kw(), n_ch});
  // Value heads in runs of n_k (one run when the share is every head).
  const int64_t run_heads = sh.n_pieces() == 1 ? nv : sh.n_k;
  for (int64_t h = 0; h < nv; h += run_heads) {
    const int64_t g = sh.GlobalVHead(h);
    add({&w.wqkv, 2 * sh.kw + g * d, run_heads * d, s.qkv.data() + 2 * sh.local_kw() + h * d, n_ch});
    add({&w.wz, g * d, run_heads * d, s.z.data() + h * d, vw});
    add({&w.wbeta, g, run_heads, s.beta.data() + h, nv});
    add({&w.walpha, g, run_heads, s.alpha.data() + h, nv});
  }
  const std::span<const Run> used(runs.data(), n_runs);
  int64_t total = 0;
  for (const Run& r : used) total += r.n;
  s.proj.resize(static_cast<size_t>(total) * n_tokens);
  std::array<kernels::MatMulProduct, kernels::kMaxMatMulProducts> products;
  int64_t at = 0;
  for (size_t i = 0; i < n_runs; ++i) {
    const Run& r = runs[i];
    products[i] = {r.w->Rows(r.row, r.row + r.n), x, n_tokens, s.proj.data() + at};
    at += r.n * n_tokens;
  }
  kernels::MatMulBatch(std::span<const kernels::MatMulProduct>(products.data(), n_runs), env.pool,
                       env.matmul_scratch);
  at = 0;
  for (const Run& r : used) {
    for (int t = 0; t < n_tokens; ++t) {
      std::copy_n(s.proj.data() + at + t * r.n, r.n, r.dst + t * r.dst_stride);
    }
    at += r.n * n_tokens;
  }
}

}  // namespace

void DeltaNet(const BlockEnv& env, const DeltaNetWeights& w, const HybridConfig& c, HeadRange k_heads,
              float eps, int state_layer, const float* x, RecurrentState& state, DeltaNetScratch& s,
              float* out) {
  COHORT_CHECK(0 <= k_heads.begin && k_heads.begin < k_heads.end && k_heads.end <= c.k_heads);
  const DeltaShare sh{c.head_dim, c.key_width(), k_heads.size(), k_heads.begin, c.k_heads,
                      c.v_heads / c.k_heads};
  const int n_tokens = env.n_tokens;
  const int64_t d = c.head_dim;
  const int64_t n_ch = sh.local_channels();
  const int64_t kw = sh.local_kw();
  const int64_t vw = sh.local_vw();
  const int64_t nv = sh.local_v_heads();
  const int64_t nk = sh.n_k;
  const int n_k = c.conv_kernel;
  COHORT_CHECK_EQ(state.conv_floats(), DeltaNetConvFloats(c, k_heads.size()));
  COHORT_CHECK_EQ(state.delta_floats(), DeltaNetStateFloats(c, k_heads.size()));
  s.qkv.resize(static_cast<size_t>(n_tokens) * n_ch);
  s.conv.resize(static_cast<size_t>(n_tokens) * n_ch);
  s.z.resize(static_cast<size_t>(n_tokens) * vw);
  s.beta.resize(static_cast<size_t>(n_tokens) * nv);
  s.alpha.resize(static_cast<size_t>(n_tokens) * nv);
  s.o.resize(static_cast<size_t>(n_tokens) * vw);
  InProjections(env, w, sh, x, s);

  // Causal conv1d per channel over [its kept inputs, this batch's inputs] of each sequence,
  // tokens in batch order; channels are independent, so threads take channel ranges.
  RunOnPool(env.pool, [&](int thread, int threads) {
    int64_t begin, end;
    SplitRange(n_ch, thread, threads, &begin, &end);
    for (int t = 0; t < n_tokens; ++t) {
      float* cs = state.Conv(state_layer, env.seq_ids[t]);
      for (int64_t ch = begin; ch < end; ++ch) {
        float* hist = cs + ch * (n_k - 1);
        const float* wk = w.conv + sh.GlobalChannel(ch) * n_k;
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
    for (int64_t h = 0; h < 2 * nk; ++h) L2Norm(row + h * d, d, eps);  // q heads, then k heads
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t g_head = sh.GlobalVHead(h);
      float& b = s.beta[t * nv + h];
      b = kernels::Sigmoid(b);
      float& g = s.alpha[t * nv + h];
      g = Softplus(g + w.dt_bias[g_head]) * w.a[g_head];
    }
  }

  // The recurrence: value heads are independent, tokens of a head run in batch order. Local
  // head h's output goes to its output piece: [piece][n_tokens][piece width].
  const int64_t pieces = sh.n_pieces();
  const int64_t piece_heads = nv / pieces, piece_w = piece_heads * d;
  auto o_of = [&](int t, int64_t h) {
    return s.o.data() + (h / piece_heads) * n_tokens * piece_w + t * piece_w + (h % piece_heads) * d;
  };
  RunOnPool(env.pool, [&](int thread, int threads) {
    int64_t begin, end;
    SplitRange(nv, thread, threads, &begin, &end);
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kh = h % nk;
      for (int t = 0; t < n_tokens; ++t) {
        const float* row = s.conv.data() + t * n_ch;
        float* st = state.Delta(state_layer, env.seq_ids[t]) + h * d * d;
        DeltaNetStep(d, row + kh * d, row + kw + kh * d, row + 2 * kw + h * d, s.alpha[t * nv + h],
                     s.beta[t * nv + h], st, o_of(t, h));
      }
    }
  });

  // Gated RMSNorm per head, then the output projection over the share's columns.
  for (int t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < nv; ++h) {
      float* o = o_of(t, h);
      kernels::RmsNorm(o, w.norm, d, eps, o);
      kernels::SwiGlu(s.z.data() + t * vw + h * d, o, d, o);
    }
  }
  const int64_t n_embd = w.wout.n_rows();
  for (int64_t p = 0; p < pieces; ++p) {
    const int64_t col = sh.GlobalVHead(p * piece_heads) * d;
    const TensorView cols = ColumnSlice(w.wout, col, col + piece_w);
    const float* in = s.o.data() + p * n_tokens * piece_w;
    if (p == 0) {
      kernels::MatMul(cols, in, n_tokens, out, env.pool, env.matmul_scratch);
      continue;
    }
    s.partial.resize(static_cast<size_t>(n_tokens) * n_embd);
    kernels::MatMul(cols, in, n_tokens, s.partial.data(), env.pool, env.matmul_scratch);
    kernels::Add(s.partial.data(), n_tokens * n_embd, out);
  }
}

}  // namespace cohort::model
