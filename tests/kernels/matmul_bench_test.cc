// A hand-run micro-benchmark (label slow, not in the default run): MatMul on a 2048 x 8192
// Q4_0 / Q8_0 matrix (rows as stored and packed) against the loop of one vec-dot per
// (token, row) that the tile-less path runs, for 1 and 64 tokens on 2 threads, the variants
// alternated round by round and the medians compared, so that a shared, noisy machine shifts
// both alike. Prints the ratios; asserts only that every variant gives the same bits.
// Usage: kernels_matmul_bench [--gtest_filter=...]; COHORT_BENCH_ROUNDS (default 9) rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The tile-less path: activations quantized once, then per tile of 4 rows (split over the
// pool) one vec-dot per (token, row).
void VecDotMatMul(const TensorView& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool,
                  std::vector<uint8_t>* act) {
  const int64_t n = w.ne[0];
  const DType act_type = VecDotType(w.type);
  const int64_t act_bytes = RowBytes(act_type, n);
  act->resize(static_cast<size_t>(act_bytes * n_tokens));
  for (int64_t t = 0; t < n_tokens; ++t) QuantizeRow(act_type, x + t * n, act->data() + t * act_bytes, n);
  const VecDotFn dot = GetVecDot(w.type, BestSimdLevel());
  pool->ParallelFor((w.n_rows() + 3) / 4, [&](int64_t begin, int64_t end) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 4 * begin; r < std::min(4 * end, w.n_rows()); ++r) {
        y[t * w.n_rows() + r] = dot(w.row(r), act->data() + t * act_bytes, n);
      }
    }
  });
}

TEST(MatMulBench, WideTilesAgainstVecDotLoop) {
  const int rounds = std::getenv("COHORT_BENCH_ROUNDS") ? std::atoi(std::getenv("COHORT_BENCH_ROUNDS")) : 9;
  const int64_t n_in = 2048, n_out = 8192;
  ThreadPool pool(2);
  std::printf("level %s, %lld x %lld, 2 threads, medians of %d alternating rounds\n",
              SimdLevelName(BestSimdLevel()), static_cast<long long>(n_in), static_cast<long long>(n_out),
              rounds);
  for (DType type : {DType::kQ4_0, DType::kQ8_0}) {
    const int64_t row_bytes = RowBytes(type, n_in);
    std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * n_out));
    for (int64_t r = 0; r < n_out; ++r) {
      const std::vector<float> row = testing::RandomRow(n_in, 1000 + static_cast<uint32_t>(r));
      QuantizeRow(type, row.data(), bytes.data() + r * row_bytes, n_in);
    }
    const TensorView plain = TensorView::Make(type, bytes.data(), {n_in, n_out, 1, 1});
    std::vector<uint8_t> packed_bytes;
    TensorView packed = plain;
    const bool can_pack = CanPackRows(type, n_out, row_bytes);
    if (can_pack) {
      packed_bytes.resize(bytes.size());
      PackRows(type, bytes.data(), row_bytes, n_out, packed_bytes.data());
      packed.packed = packed_bytes.data();
    }
    for (int64_t n_tokens : {1, 64}) {
      const std::vector<float> x = testing::RandomRow(n_in * n_tokens, 77);
      std::vector<uint8_t> scratch;
      std::vector<float> y_dot(static_cast<size_t>(n_out * n_tokens)), y_plain(y_dot.size()), y_packed(y_dot.size());
      struct Variant {
        const char* name;
        std::function<void()> run;
        std::vector<double> ms;
      };
      std::vector<Variant> variants;
      variants.push_back({"vec-dot loop", [&] { VecDotMatMul(plain, x.data(), n_tokens, y_dot.data(), &pool, &scratch); }, {}});
      variants.push_back({"MatMul rows", [&] { MatMul(plain, x.data(), n_tokens, y_plain.data(), &pool, &scratch); }, {}});
      if (can_pack) {
        variants.push_back({"MatMul packed", [&] { MatMul(packed, x.data(), n_tokens, y_packed.data(), &pool, &scratch); }, {}});
      }
      const int reps = n_tokens == 1 ? 20 : 2;
      for (int round = 0; round < rounds; ++round) {
        for (Variant& v : variants) {
          v.run();  // warm
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < reps; ++i) v.run();
          v.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / reps);
        }
      }
      const double base = Median(variants[0].ms);
      for (const Variant& v : variants) {
        const double ms = Median(v.ms);
        std::printf("%-5s tokens=%-3lld %-14s %8.3f ms  %7.1f GB/s  x%.2f vs vec-dot loop\n", std::string(DTypeName(type)).c_str(),
                    static_cast<long long>(n_tokens), v.name, ms, static_cast<double>(bytes.size()) / ms / 1e6, base / ms);
      }
      // MatMul's batches may take another order for grouped tokens; Q4_0 and Q8_0 take one.
      EXPECT_EQ(y_plain, y_dot);
      if (can_pack) {
        EXPECT_EQ(y_packed, y_dot);
      }
    }
  }
}

}  // namespace
}  // namespace cohort::kernels
