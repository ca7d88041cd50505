// Measuring a node: /proc/meminfo, a streaming read for memory bandwidth, a Q8_0 MatMul for
// compute throughput; conversion to the planner's profiles.
#include "cluster/profile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace cohort::cluster {
namespace {

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// Best of `passes` timed reads of the whole buffer, split over the pool's threads.
double MeasureBandwidth(const ProfileOptions& options, ThreadPool* pool) {
  const size_t n = std::max<size_t>(options.bandwidth_buffer_bytes / sizeof(uint64_t), 1024);
  std::vector<uint64_t> buffer(n);
  for (size_t i = 0; i < n; ++i) buffer[i] = i * 0x9e3779b97f4a7c15ull;  // touch every page
  std::vector<uint64_t> sums(static_cast<size_t>(pool->size()), 0);
  double best_s = 1e30;
  for (int pass = 0; pass < std::max(1, options.bandwidth_passes); ++pass) {
    const auto start = std::chrono::steady_clock::now();
    pool->ParallelRun([&](int t, int parts) {
      int64_t b, e;
      SplitRange(static_cast<int64_t>(n), t, parts, &b, &e);
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += buffer[i];
        s1 ^= buffer[i + 1];
        s2 += buffer[i + 2];
        s3 ^= buffer[i + 3];
      }
      for (; i < e; ++i) s0 += buffer[i];
      sums[static_cast<size_t>(t)] += s0 + s1 + s2 + s3;  // keeps the loads alive
    });
    best_s = std::min(best_s, Seconds(start));
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  // `total` is data-dependent, so the compiler cannot drop the loop; the comparison is false.
  if (total == 1) best_s *= 1.0000001;
  return static_cast<double>(n * sizeof(uint64_t)) / best_s;
}

// FLOP/s of a [dim x dim] Q8_0 weight times `tokens` activation rows, best of three.
double MeasureMatmul(const ProfileOptions& options, ThreadPool* pool) {
  const int64_t dim = std::max(32, options.matmul_dim / 32 * 32);
  const int64_t tokens = std::max(1, options.matmul_tokens);
  const int64_t row_bytes = RowBytes(DType::kQ8_0, dim);
  // 0x11 everywhere: each block's fp16 scale is a small normal number, each quant 17.
  std::vector<uint8_t> weights(static_cast<size_t>(row_bytes * dim), 0x11);
  std::vector<float> x(static_cast<size_t>(dim * tokens), 0.5f);
  std::vector<float> y(static_cast<size_t>(dim * tokens));
  std::vector<uint8_t> scratch;
  const TensorView w = TensorView::Make(DType::kQ8_0, weights.data(), {dim, dim, 1, 1});
  kernels::MatMul(w, x.data(), tokens, y.data(), pool, &scratch);  // warm-up
  double best_s = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = std::chrono::steady_clock::now();
    kernels::MatMul(w, x.data(), tokens, y.data(), pool, &scratch);
    best_s = std::min(best_s, Seconds(start));
  }
  return 2.0 * static_cast<double>(dim) * static_cast<double>(dim) * static_cast<double>(tokens) /
         best_s;
}

}  // namespace

Result<ResourceProfile> MeasureResources(const ProfileOptions& options) {
  ResourceProfile p;
  COHORT_RETURN_IF_ERROR(ReadMeminfo(&p.memory_total_bytes, &p.memory_available_bytes));
  p.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  p.simd = kernels::SimdLevelName(kernels::BestSimdLevel());
  if (!options.run_benchmarks) return p;
  ThreadPool pool(options.threads > 0 ? options.threads : p.cores);
  p.memory_bandwidth_Bps = MeasureBandwidth(options, &pool);
  p.matmul_flops = MeasureMatmul(options, &pool);
  p.measured = true;
  return p;
}

nlohmann::json ResourceToJson(const ResourceProfile& p) {
  return {{"memory_total_bytes", p.memory_total_bytes},
          {"memory_available_bytes", p.memory_available_bytes},
          {"cores", p.cores},
          {"memory_bandwidth_Bps", p.memory_bandwidth_Bps},
          {"matmul_flops", p.matmul_flops},
          {"measured", p.measured},
          {"simd", p.simd}};
}

ResourceProfile ResourceFromJson(const nlohmann::json& j) {
  ResourceProfile p;
  if (!j.is_object()) return p;
  auto num = [&](const char* key) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : 0.0;
  };
  p.memory_total_bytes = std::max(0.0, num("memory_total_bytes"));
  p.memory_available_bytes = std::max(0.0, num("memory_available_bytes"));
  p.cores = static_cast<int>(std::clamp(num("cores"), 0.0, 1e6));
  p.memory_bandwidth_Bps = std::max(0.0, num("memory_bandwidth_Bps"));
  p.matmul_flops = std::max(0.0, num("matmul_flops"));
  p.measured = j.contains("measured") && j["measured"].is_boolean() && j["measured"].get<bool>();
  if (j.contains("simd") && j["simd"].is_string()) p.simd = j["simd"].get<std::string>().substr(0, 32);
  return p;
}

plan::NodeProfile ToNodeProfile(const std::string& name, const ResourceProfile& p) {
  plan::NodeProfile n;
  n.name = name;
  n.memory_bytes = p.memory_total_bytes;
  n.usable_memory_fraction =
      p.memory_total_bytes > 0 ? std::clamp(p.memory_available_bytes / p.memory_total_bytes, 0.0, 1.0)
                               : 0.0;
  n.memory_bandwidth_Bps = p.memory_bandwidth_Bps;
  n.flops = p.matmul_flops;
  n.source = p.measured ? "measured by cohort node" : "meminfo only (benchmarks not run)";
  return n;
}

plan::LinkProfile ToLinkProfile(const std::string& name, const LinkMeasurement& m) {
  plan::LinkProfile l;
  l.name = name;
  l.latency_s = m.latency_s;
  l.bandwidth_Bps = m.bandwidth_Bps;
  l.source = "measured by cohort node (control-channel ping, TCP probe)";
  return l;
}

}  // namespace cohort::cluster
