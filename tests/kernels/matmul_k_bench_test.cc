// Hand-run micro-benchmark (label slow): MatMul on Q4_K and Q6_K matrices larger than the
// caches, 1 and 64 tokens, 2 threads, on the packed rows, on the stored rows, and by the
// vec-dot loop MatMul used before it had tiles for the type at this level (one vec-dot per
// (token, row), token tiles of 64 outermost, rows split over the pool). The three alternate,
// round by round, so a noisy shared machine slows them alike; it prints the medians, the
// weights' read rate and the ratios to the vec-dot loop, and checks the three agree bit for
// bit. Run: ctest -L slow -R kernels_matmul_bench --verbose (or the binary directly).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

double Seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The pre-tile path: activations quantized over the pool, then vec-dots in 4-row units, in
// the batch orders MatMul keeps (GroupedTokens).
void VecDotLoop(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
                std::vector<uint8_t>* act) {
  const SimdLevel level = BestSimdLevel();
  const DType at = VecDotType(w.type);
  const int64_t n = w.ne[0], rows = w.n_rows(), stride = RowBytes(at, n);
  act->resize(static_cast<size_t>(stride * n_tokens));
  pool->ParallelFor(n_tokens, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) QuantizeRow(at, x + t * n, act->data() + t * stride, n);
  });
  const VecDotFn dot = GetVecDot(w.type, level), grouped = GetVecDotGrouped(w.type, level);
  const int64_t n_grouped = GroupedTokens(w.type, n_tokens);
  pool->ParallelFor((rows + 3) / 4, [&](int64_t b, int64_t e) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += 64) {
      for (int64_t u = b; u < e; ++u) {
        for (int64_t t = t0; t < std::min(t0 + 64, n_tokens); ++t) {
          const VecDotFn f = t < n_grouped ? grouped : dot;
          for (int64_t r = 4 * u; r < std::min(4 * u + 4, rows); ++r) {
            y[t * rows + r] = f(w.data + r * w.row_bytes, act->data() + t * stride, n);
          }
        }
      }
    }
  });
}

TEST(MatMulBench, KQuantTilesAgainstTheVecDotLoop) {
  ThreadPool pool(2);
  const int64_t n_in = 4096, n_out = 14336;
  std::printf("level %s, %lld x %lld, 2 threads\n", SimdLevelName(BestSimdLevel()), static_cast<long long>(n_out),
              static_cast<long long>(n_in));
  for (DType type : {DType::kQ4_K, DType::kQ6_K}) {
    const int64_t row_bytes = RowBytes(type, n_in);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * n_out));
    constexpr int kDistinct = 64;  // rows repeat: the contents do not change the speed
    for (int64_t r = 0; r < kDistinct; ++r) {
      const std::vector<float> v = testing::RandomRow(n_in, 5 + static_cast<uint32_t>(r));
      QuantizeRow(type, v.data(), bytes.data() + r * row_bytes, n_in);
    }
    for (int64_t r = kDistinct; r < n_out; ++r) {
      std::memcpy(bytes.data() + r * row_bytes, bytes.data() + (r % kDistinct) * row_bytes, row_bytes);
    }
    const TensorView stored = TensorView::Make(type, bytes.data(), {n_in, n_out, 1, 1});
    std::vector<uint8_t> packed_bytes;
    TensorView packed = stored;
    if (CanPackRows(type, n_out, row_bytes)) {
      packed_bytes.resize(bytes.size());
      PackRows(type, bytes.data(), row_bytes, n_out, packed_bytes.data());
      packed.packed = packed_bytes.data();
    }
    for (int64_t tokens : {1, 64}) {
      const std::vector<float> x = testing::RandomRow(n_in * tokens, 9);
      std::vector<float> y_packed(static_cast<size_t>(n_out * tokens)), y_stored(y_packed.size()), y_loop(y_packed.size());
      std::vector<uint8_t> scratch, act;
      const int reps = tokens == 1 ? 40 : 1;
      std::vector<double> t_packed, t_stored, t_loop;
      for (int round = 0; round < 9; ++round) {
        double t0 = Seconds();
        for (int i = 0; i < reps; ++i) MatMul(packed, x.data(), tokens, y_packed.data(), &pool, &scratch);
        t_packed.push_back((Seconds() - t0) / reps);
        t0 = Seconds();
        for (int i = 0; i < reps; ++i) MatMul(stored, x.data(), tokens, y_stored.data(), &pool, &scratch);
        t_stored.push_back((Seconds() - t0) / reps);
        t0 = Seconds();
        for (int i = 0; i < reps; ++i) VecDotLoop(stored, x.data(), tokens, y_loop.data(), &pool, &act);
        t_loop.push_back((Seconds() - t0) / reps);
      }
      ASSERT_EQ(y_packed, y_loop) << DTypeName(type) << " tokens=" << tokens;
      ASSERT_EQ(y_stored, y_loop) << DTypeName(type) << " tokens=" << tokens;
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      const double p = median(t_packed), s = median(t_stored), l = median(t_loop);
      const double gb = static_cast<double>(bytes.size()) / 1e9;
      std::printf("%-5s tokens=%-3lld packed %8.3f ms (%5.1f GB/s, %.2fx)  stored %8.3f ms (%5.1f GB/s, %.2fx)  "
                  "vec-dot loop %8.3f ms (%5.1f GB/s)\n",
                  std::string(DTypeName(type)).c_str(), static_cast<long long>(tokens), 1e3 * p, gb / p, l / p, 1e3 * s, gb / s, l / s,
                  1e3 * l, gb / l);
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
