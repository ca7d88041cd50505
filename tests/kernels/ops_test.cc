// The float ops of kernels/ops.h against straightforward double-precision references, with odd
// sizes, in-place use and the edge cases the forward pass relies on.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kernels/ggml_sums.h"
#include "kernels/ops.h"

namespace cohort::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(OpsTest, RmsNormMatchesReference) {
  for (int64_t n : {1, 7, 33, 64, 257, 1000}) {
    const std::vector<float> x = Random(n, 1 + n, 3.0f);
    const std::vector<float> w = Random(n, 100 + n);
    double ss = 0.0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const double scale = 1.0 / std::sqrt(ss / n + 1e-5);
    std::vector<float> y(n), y_no_w(n);
    RmsNorm(x.data(), w.data(), n, 1e-5f, y.data());
    RmsNorm(x.data(), nullptr, n, 1e-5f, y_no_w.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], x[i] * scale * w[i], 1e-5 * (1 + std::fabs(x[i] * scale * w[i]))) << n;
      EXPECT_NEAR(y_no_w[i], x[i] * scale, 1e-5 * (1 + std::fabs(x[i] * scale))) << n;
    }
    std::vector<float> in_place = x;  // y may alias x
    RmsNorm(in_place.data(), w.data(), n, 1e-5f, in_place.data());
    EXPECT_EQ(in_place, y);
  }
}

TEST(OpsTest, RmsNormOfZerosIsZero) {
  std::vector<float> x(9, 0.0f), y(9, 1.0f);
  RmsNorm(x.data(), nullptr, 9, 1e-5f, y.data());
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

// Reference rotation of one head by pos, with theta_i = pos * base^(-2i/n_rot).
std::vector<float> RopeReference(const std::vector<float>& x, RopeMode mode, int n_rot, double base,
                                 int64_t pos) {
  std::vector<float> y = x;
  for (int i = 0; i < n_rot / 2; ++i) {
    const double theta = pos * std::pow(base, -2.0 * i / n_rot);
    const int a = mode == RopeMode::kNorm ? 2 * i : i;
    const int b = mode == RopeMode::kNorm ? 2 * i + 1 : i + n_rot / 2;
    y[a] = static_cast<float>(x[a] * std::cos(theta) - x[b] * std::sin(theta));
    y[b] = static_cast<float>(x[a] * std::sin(theta) + x[b] * std::cos(theta));
  }
  return y;
}

TEST(OpsTest, RopeNormAndNeoxMatchReference) {
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
    for (int n_rot : {2, 8, 32, 64}) {
      for (int64_t pos : {0, 1, 5, 77}) {
        const int head_dim = 64;
        const int n_heads = 3;
        std::vector<float> x = Random(head_dim * n_heads, 7 + n_rot + static_cast<int>(pos));
        const std::vector<float> orig = x;
        RopeParams p;
        p.mode = mode;
        p.n_rot = n_rot;
        p.freq_base = 10000.0f;
        std::vector<float> cache(n_rot);
        Rope(p, pos, x.data(), n_heads, head_dim, cache.data());
        for (int h = 0; h < n_heads; ++h) {
          const std::vector<float> head(orig.begin() + h * head_dim, orig.begin() + (h + 1) * head_dim);
          const std::vector<float> want = RopeReference(head, mode, n_rot, 10000.0, pos);
          for (int i = 0; i < head_dim; ++i) {
            // Values past n_rot are copied untouched.
            if (i >= n_rot) {
              ASSERT_EQ(x[h * head_dim + i], head[i]);
            } else {
              ASSERT_NEAR(x[h * head_dim + i], want[i], 2e-5) << "mode " << static_cast<int>(mode)
                                                               << " n_rot " << n_rot << " pos " << pos;
            }
          }
        }
      }
    }
  }
}

TEST(OpsTest, RopeLinearScalingAndFreqFactorsDivideTheta) {
  const int n_rot = 16;
  const std::vector<float> x = Random(n_rot, 3);
  std::vector<float> cache(n_rot);
  // freq_scale 0.5 at position 10 equals no scaling at position 5.
  RopeParams scaled;
  scaled.n_rot = n_rot;
  scaled.freq_scale = 0.5f;
  std::vector<float> a = x;
  Rope(scaled, 10, a.data(), 1, n_rot, cache.data());
  RopeParams plain;
  plain.n_rot = n_rot;
  std::vector<float> b = x;
  Rope(plain, 5, b.data(), 1, n_rot, cache.data());
  for (int i = 0; i < n_rot; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  // freq_factors of 2 everywhere at position 10 also equal position 5.
  const std::vector<float> factors(n_rot / 2, 2.0f);
  plain.freq_factors = factors.data();
  std::vector<float> c = x;
  Rope(plain, 10, c.data(), 1, n_rot, cache.data());
  for (int i = 0; i < n_rot; ++i) EXPECT_NEAR(c[i], b[i], 1e-6);
}

TEST(OpsTest, YarnCorrectionDimsAndRamp) {
  RopeParams p;
  p.n_rot = 64;
  p.freq_base = 10000.0f;
  p.n_ctx_orig = 4096;
  p.beta_fast = 32.0f;
  p.beta_slow = 1.0f;
  float dims[2];
  RopeYarnCorrDims(p, dims);
  // n_rot * ln(n_ctx_orig / (beta * 2 pi)) / (2 ln base), floored / ceiled.
  auto dim = [](double beta) { return 64.0 * std::log(4096.0 / (beta * 2 * std::numbers::pi)) / (2 * std::log(10000.0)); };
  EXPECT_EQ(dims[0], std::floor(dim(32.0)));
  EXPECT_EQ(dims[1], std::ceil(dim(1.0)));

  // With ext_factor 1: pairs below dims[0] keep the unscaled angle, pairs above dims[1] take
  // the interpolated one, and cos/sin are scaled by attn_factor * (1 + 0.1 ln(1/freq_scale)).
  p.freq_scale = 0.25f;
  p.ext_factor = 1.0f;
  p.attn_factor = 0.5f;
  std::vector<float> cache(p.n_rot);
  const int64_t pos = 9;
  RopeCache(p, pos, cache.data());
  const double mscale = 0.5 * (1.0 + 0.1 * std::log(4.0));
  for (int i0 = 0; i0 < p.n_rot; i0 += 2) {
    const double theta_extrap = pos * std::pow(10000.0, -static_cast<double>(i0) / p.n_rot);
    const double y = (i0 / 2 - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
    const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
    const double theta = 0.25 * theta_extrap * (1 - ramp) + theta_extrap * ramp;
    EXPECT_NEAR(cache[i0], std::cos(theta) * mscale, 2e-5) << i0;
    EXPECT_NEAR(cache[i0 + 1], std::sin(theta) * mscale, 2e-5) << i0;
  }
}

TEST(OpsTest, SoftmaxMatchesReference) {
  for (int64_t n : {1, 2, 17, 300}) {
    std::vector<float> x = Random(n, 11 + n, 5.0f);
    x[0] += 80.0f;  // large values must not overflow
    double max = x[0];
    for (float v : x) max = std::max<double>(max, v);
    double sum = 0.0;
    for (float v : x) sum += std::exp(v - max);
    std::vector<float> y = x;
    Softmax(y.data(), n);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], std::exp(x[i] - max) / sum, 1e-6);
      total += y[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST(OpsTest, SoftmaxOfMaskedEntriesIsZero) {
  std::vector<float> x = {1.0f, -std::numeric_limits<float>::infinity(), 1.0f};
  Softmax(x.data(), 3);
  EXPECT_FLOAT_EQ(x[0], 0.5f);
  EXPECT_EQ(x[1], 0.0f);
  EXPECT_FLOAT_EQ(x[2], 0.5f);
}

TEST(OpsTest, ExpPolyIsCloseToExpAndSaturates) {
  for (float x = -87.0f; x < 88.0f; x += 0.37f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(ExpPoly(x), want, 4e-7 * want) << x;  // within ~2 ulp
  }
  EXPECT_EQ(ExpPoly(0.0f), 1.0f);
  EXPECT_EQ(ExpPoly(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ExpPoly(-200.0f), 0.0f);
  EXPECT_EQ(ExpPoly(200.0f), std::numeric_limits<float>::infinity());
}

TEST(OpsTest, SiluSigmoidSwiGlu) {
  for (float v : {-20.0f, -1.0f, 0.0f, 0.5f, 3.0f, 30.0f}) {
    EXPECT_NEAR(Sigmoid(v), 1.0 / (1.0 + std::exp(-static_cast<double>(v))), 1e-7);
    EXPECT_NEAR(Silu(v), v / (1.0 + std::exp(-static_cast<double>(v))), 1e-6 * (1 + std::fabs(v)));
  }
  const int64_t n = 37;
  const std::vector<float> g = Random(n, 5, 2.0f);
  const std::vector<float> u = Random(n, 6, 2.0f);
  std::vector<float> out(n);
  SwiGlu(g.data(), u.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
    EXPECT_NEAR(out[i], want, 1e-5 * (1 + std::fabs(want)));
  }
  std::vector<float> in_place = g;  // out may alias gate
  SwiGlu(in_place.data(), u.data(), n, in_place.data());
  EXPECT_EQ(in_place, out);
}

TEST(OpsTest, VectorOps) {
  const int64_t n = 13;
  const std::vector<float> a = Random(n, 21);
  const std::vector<float> b = Random(n, 22);
  std::vector<float> y = b;
  Add(a.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], a[i] + b[i]);
  y = b;
  AddScaled(a.data(), 0.5f, n, y.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], b[i] + 0.5f * a[i]);
  y = b;
  Mul(a.data(), n, y.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], a[i] * b[i]);
  y = b;
  Scale(-2.0f, n, y.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[i], -2.0f * b[i]);
  double dot = 0.0;
  for (int64_t i = 0; i < n; ++i) dot += static_cast<double>(a[i]) * b[i];
  EXPECT_NEAR(Dot(a.data(), b.data(), n), dot, 1e-6);
  std::vector<uint16_t> half(n);
  double half_dot = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    half[i] = Fp32ToFp16(a[i]);
    half_dot += static_cast<double>(Fp16ToFp32(half[i])) * b[i];
  }
  EXPECT_NEAR(DotF16(half.data(), b.data(), n), half_dot, 1e-6);
}

TEST(OpsTest, ArgmaxTiesGoToLowestIndex) {
  const std::vector<float> x = {1.0f, 3.0f, -2.0f, 3.0f, 0.0f};
  EXPECT_EQ(Argmax(x.data(), 5), 1);
  EXPECT_EQ(Argmax(x.data(), 1), 0);
}

// ---- ggml_sums.h: llama.cpp's attention summation orders ----

// ggml_vec_dot_f32 on AVX-512, restated with explicit vectors: 4 accumulators of 16 lanes,
// (v0 + v2) + (v1 + v3), then _mm512_reduce_add_ps's tree, then the n % 64 tail one by one
// (GCC's vectorised tail: rounded products for the chunks of 16 and 8, fused for the rest).
float VecDotF32Restated(const float* a, const float* b, int64_t n) {
  float v[4][16] = {};
  const int64_t n_main = n / 64 * 64;
  for (int64_t i = 0; i < n_main; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 16; ++l) v[j][l] = std::fma(a[i + 16 * j + l], b[i + 16 * j + l], v[j][l]);
    }
  }
  float x[16];
  for (int l = 0; l < 16; ++l) x[l] = (v[0][l] + v[2][l]) + (v[1][l] + v[3][l]);
  float h[8], q[4];
  for (int l = 0; l < 8; ++l) h[l] = x[l] + x[l + 8];
  for (int l = 0; l < 4; ++l) q[l] = h[l] + h[l + 4];
  float sum = (q[0] + q[2]) + (q[1] + q[3]);
  const int64_t n_rounded = n_main + (n - n_main) / 8 * 8;
  for (int64_t i = n_main; i < n; ++i) {
    if (i < n_rounded) {
      const float product = std::fma(a[i], b[i], 0.0f);  // rounded, not fused into the add
      sum += product;
    } else {
      sum = std::fma(a[i], b[i], sum);
    }
  }
  return sum;
}

TEST(GgmlSumsTest, DotIsGgmlVecDotF32AndAccurate) {
  for (int64_t n : {1, 15, 64, 100, 128, 257}) {
    const std::vector<float> a = Random(n, 300 + n), b = Random(n, 400 + n);
    const float got = DotGgml(a.data(), b.data(), n);
    EXPECT_EQ(got, VecDotF32Restated(a.data(), b.data(), n)) << n;
    double ref = 0.0;
    for (int64_t i = 0; i < n; ++i) ref += static_cast<double>(a[i]) * b[i];
    EXPECT_NEAR(got, ref, 1e-5 * std::sqrt(static_cast<double>(n))) << n;
  }
}

TEST(GgmlSumsTest, WeightedRowSumOrdersAndZeroPadding) {
  const int64_t stride = 41;  // rows wider than the summed columns
  for (int64_t n : {1, 5, 64, 77, 200}) {
    for (int64_t width : {1, 16, 33}) {
      const std::vector<float> w = Random(n, 500 + n), rows = Random(n * stride, 600 + n);
      for (SumOrder order : {SumOrder::kVecDot, SumOrder::kSgemm}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " width=" << width
                                          << (order == SumOrder::kSgemm ? " sgemm" : " vec_dot"));
        std::vector<float> out(static_cast<size_t>(width), -1.0f);
        WeightedRowSum(w.data(), rows.data(), stride, n, width, order, out.data());
        // llama.cpp sums over the whole padded cache: zero weights on zero rows change no bit.
        const int64_t n_pad = 256;
        std::vector<float> w_pad(w), rows_pad(rows);
        w_pad.resize(n_pad, 0.0f);
        rows_pad.resize(n_pad * stride, 0.0f);
        std::vector<float> out_pad(static_cast<size_t>(width));
        WeightedRowSum(w_pad.data(), rows_pad.data(), stride, n_pad, width, order, out_pad.data());
        std::vector<float> column(static_cast<size_t>(n_pad));
        for (int64_t i = 0; i < width; ++i) {
          EXPECT_EQ(out[i], out_pad[i]) << i;
          double ref = 0.0;
          for (int64_t p = 0; p < n; ++p) ref += static_cast<double>(w[p]) * rows[p * stride + i];
          EXPECT_NEAR(out[i], ref, 1e-5 * std::sqrt(static_cast<double>(n))) << i;
          // A token alone: ggml_vec_dot_f32 of the weights with the value column (n_kv % 64 == 0).
          for (int64_t p = 0; p < n_pad; ++p) column[p] = rows_pad[p * stride + i];
          if (order == SumOrder::kVecDot) {
            EXPECT_EQ(out[i], DotGgml(w_pad.data(), column.data(), n_pad)) << i;
          }
        }
      }
    }
  }
}

TEST(GgmlSumsTest, RopeFusesTheFirstProductOfEachOutput) {
  // ggml's rotate_pairs under GCC's FP contraction: x0*c - x1*s -> fma(x0, c, -(x1*s)),
  // x0*s + x1*c -> fma(x0, s, x1*c).
  const std::vector<float> x = Random(64, 700);
  const std::vector<float> cache = Random(64, 701);
  for (RopeMode mode : {RopeMode::kNorm, RopeMode::kNeox}) {
    std::vector<float> y(x);
    RopeApply(mode, 64, cache.data(), y.data());
    for (int i = 0; i < 32; ++i) {
      const int a = mode == RopeMode::kNorm ? 2 * i : i;
      const int b = mode == RopeMode::kNorm ? 2 * i + 1 : i + 32;
      const float c = cache[2 * i], s = cache[2 * i + 1];
      EXPECT_EQ(y[a], std::fma(x[a], c, -(x[b] * s)));
      EXPECT_EQ(y[b], std::fma(x[a], s, x[b] * c));
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
