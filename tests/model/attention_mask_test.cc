// AttendOne and AttendHeads with gpt-oss's extras against a plain double-precision reference:
// a sliding window (positions before first_pos masked) and attention sinks (a per-head logit
// in the softmax's denominator only), for F32 and F16 caches.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "model/attention_core.h"

namespace cohort::model {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// softmax over positions [first, n_pos) plus the sink, applied to v; in double.
std::vector<double> Reference(const float* q, const std::vector<float>& k, const std::vector<float>& v, int d,
                              int n_pos, int first, float scale, float sink) {
  std::vector<double> s(n_pos);
  double max = sink;
  for (int p = first; p < n_pos; ++p) {
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += static_cast<double>(q[i]) * k[p * d + i];
    s[p] = dot * scale;
    max = std::max(max, s[p]);
  }
  double z = std::exp(static_cast<double>(sink) - max);
  for (int p = first; p < n_pos; ++p) z += std::exp(s[p] - max);
  std::vector<double> out(d, 0.0);
  for (int p = first; p < n_pos; ++p) {
    const double w = std::exp(s[p] - max) / z;
    for (int i = 0; i < d; ++i) out[i] += w * v[p * d + i];
  }
  return out;
}

TEST(AttendMask, WindowAndSinksMatchTheReference) {
  constexpr int d = 32, n_pos = 21, n_heads = 3;
  const std::vector<float> k = Random(n_pos * d, 1), v = Random(n_pos * d, 2), q = Random(n_heads * d, 3);
  std::vector<uint16_t> k16(k.size()), v16(v.size());
  std::vector<float> k_r(k.size()), v_r(v.size());  // the F16 cache's values, as floats
  for (size_t i = 0; i < k.size(); ++i) {
    k16[i] = Fp32ToFp16(k[i]);
    v16[i] = Fp32ToFp16(v[i]);
    k_r[i] = Fp16ToFp32(k16[i]);
    v_r[i] = Fp16ToFp32(v16[i]);
  }
  const float sinks[n_heads] = {0.5f, -2.0f, 3.0f};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (bool f16 : {false, true}) {
    const CacheRows kr = f16 ? CacheRows{reinterpret_cast<const uint8_t*>(k16.data()), d * 2, DType::kF16}
                             : CacheRows{reinterpret_cast<const uint8_t*>(k.data()), d * 4, DType::kF32};
    const CacheRows vr = f16 ? CacheRows{reinterpret_cast<const uint8_t*>(v16.data()), d * 2, DType::kF16}
                             : CacheRows{reinterpret_cast<const uint8_t*>(v.data()), d * 4, DType::kF32};
    for (int first : {0, 13, 20}) {
      for (bool with_sinks : {false, true}) {
        std::vector<float> scores(n_heads * ScoresStride(n_pos)), out(n_heads * d);
        AttendMask mask{first, with_sinks ? sinks : nullptr};
        AttendHeads(q.data(), d, n_heads, d, kr, vr, d, n_pos, scale, scores.data(), out.data(), d,
                    kernels::SumOrder::kVecDot, mask);
        for (int h = 0; h < n_heads; ++h) {
          const float sink = with_sinks ? sinks[h] : -std::numeric_limits<float>::infinity();
          const std::vector<double> want =
              Reference(q.data() + h * d, f16 ? k_r : k, f16 ? v_r : v, d, n_pos, first, scale, sink);
          // The F16 path rounds q and the weights to half as ggml does: a looser bound.
          const double tol = f16 ? 2e-2 : 1e-5;
          for (int i = 0; i < d; ++i) {
            ASSERT_NEAR(out[h * d + i], want[i], tol) << "f16=" << f16 << " first=" << first << " sinks=" << with_sinks
                                                      << " head " << h << " i " << i;
          }
        }
      }
    }
  }
}

// A sink of -inf changes nothing, bit for bit: its exp adds an exact zero.
TEST(AttendMask, MinusInfinitySinkIsNoSink) {
  constexpr int d = 16, n_pos = 9;
  const std::vector<float> k = Random(n_pos * d, 4), v = Random(n_pos * d, 5), q = Random(d, 6);
  const CacheRows kr{reinterpret_cast<const uint8_t*>(k.data()), d * 4, DType::kF32};
  const CacheRows vr{reinterpret_cast<const uint8_t*>(v.data()), d * 4, DType::kF32};
  std::vector<float> s(ScoresStride(n_pos)), a(d), b(d);
  const float none = -std::numeric_limits<float>::infinity();
  AttendOne(q.data(), d, kr, vr, d, n_pos, 0.25f, s.data(), a.data());
  AttendOne(q.data(), d, kr, vr, d, n_pos, 0.25f, s.data(), b.data(), kernels::SumOrder::kVecDot, {0, &none});
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace cohort::model
