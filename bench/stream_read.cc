// STREAM-style read bandwidth: N threads each sum their share of a buffer far larger than
// the caches, the way a matrix-vector product streams its weights. Prints the best of
// several passes in GB/s (10^9 bytes/s), the ceiling a memory-bound decoder can reach. Passes
// alternate between a plain read and one that prefetches each page ahead (SumBytes).
// Built and run by bench/compare-llamacpp.sh; usage: stream_read [THREADS] [MIB] [PASSES].
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

// Sums 64-byte lines with four independent accumulators so the loads, not the adds, limit.
// kPageAhead: also prefetches the first line of the page 8 KiB on, since the hardware
// prefetchers stop at 4 KiB page boundaries and each new page otherwise starts with a demand
// miss (cohort's single-token kernels do the same; on this class of VM it reads up to a
// fifth faster). The best of both is the ceiling.
template <bool kPageAhead>
__attribute__((target("avx2"))) uint64_t SumBytes(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    if (kPageAhead && i % 4096 == 0 && i + 8192 < n) {
      asm volatile("prefetcht0 %0" : : "m"(p[i + 8192]));  // asm: never dropped as unused
    }
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  uint64_t lanes[4];
  std::memcpy(lanes, &s, sizeof lanes);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const size_t mib = argc > 2 ? static_cast<size_t>(std::max(64, std::atoi(argv[2]))) : 1024;
  const int passes = argc > 3 ? std::max(1, std::atoi(argv[3])) : 10;
  const size_t bytes = mib << 20;
  // On huge pages where the kernel gives them, as cohort's weights are (model/owned_slices.h):
  // the ceiling is the best the machine reads, not the best with 4 KiB pages.
  auto* buf = static_cast<uint8_t*>(std::aligned_alloc(size_t{2} << 20, bytes));
  if (buf == nullptr) return 1;
  ::madvise(buf, bytes, MADV_HUGEPAGE);
  // Each thread touches (first-writes) its own share, as the mmapped weights are paged in.
  const size_t share = bytes / threads / 128 * 128;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([=] { std::memset(buf + t * share, t + 1, share); });
  }
  for (auto& th : pool) th.join();

  double best = 0.0;
  uint64_t sink = 0;
  for (int pass = 0; pass < passes; ++pass) {
    std::vector<uint64_t> sums(threads);
    pool.clear();
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t) {
      // Odd passes with the page-ahead prefetch, even ones without.
      pool.emplace_back([=, &sums] {
        sums[t] = pass % 2 ? SumBytes<true>(buf + t * share, share) : SumBytes<false>(buf + t * share, share);
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(share * threads) / s / 1e9);
    for (uint64_t v : sums) sink += v;
  }
  std::printf("%.2f\n", best);
  std::fprintf(stderr, "stream_read: %d threads, %zu MiB, best of %d passes (checksum %llu)\n",
               threads, mib, passes, static_cast<unsigned long long>(sink));
  std::free(buf);
  return 0;
}
