// ThreadPool: every index is visited exactly once, for many sizes, repeated and back-to-back
// calls, and when one task stalls.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>
#include <thread>
#include <vector>

namespace cohort {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep) {
        pool.ParallelFor(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
        });
      }
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(hits[static_cast<size_t>(i)].load(), 20) << i;
    }
  }
}

TEST(ThreadPool, ParallelRunGivesEachThreadItsIndex) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> seen(4);
  pool.ParallelRun([&](int index, int n) {
    EXPECT_EQ(n, 4);
    seen[static_cast<size_t>(index)].fetch_add(1);
  });
  for (auto& s : seen) EXPECT_EQ(s.load(), 1);
}

// Back-to-back tiny jobs race workers joining late against the caller closing the job: every
// task must still run exactly once, and a descheduled worker must never run a stale job.
TEST(ThreadPool, ManyTinyJobsEachRunEveryTaskOnce) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::atomic<int64_t> total{0};
    const int jobs = 5000;
    for (int j = 0; j < jobs; ++j) {
      pool.ParallelFor(3, [&](int64_t b, int64_t e) { total.fetch_add(e - b); });
      pool.ParallelRun([&](int index, int n) { total.fetch_add(index < n ? 1 : 1000); });
    }
    EXPECT_EQ(total.load(), int64_t{jobs} * (3 + threads));
  }
}

TEST(ThreadPool, CallerFinishesWhileAWorkerIsBusyElsewhere) {
  // One task stalls; the remaining tasks are claimed by whichever threads are free.
  ThreadPool pool(2);
  std::vector<std::atomic<int>> hits(64);
  pool.ParallelFor(64, [&](int64_t b, int64_t e) {
    if (b == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

// Each thread's share is one contiguous range (a stream through memory for a matmul), handed
// out in eighths whoever takes them: 2 threads over 1600 indices make exactly 16 pieces of
// 100, none across the shares' boundary at 800.
TEST(ThreadPool, ParallelForHandsOutEachShareInEighths) {
  ThreadPool pool(2);
  for (int rep = 0; rep < 50; ++rep) {
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> pieces;
    pool.ParallelFor(1600, [&](int64_t b, int64_t e) {
      std::lock_guard<std::mutex> lock(mutex);
      pieces.emplace_back(b, e);
    });
    ASSERT_EQ(pieces.size(), 16u);
    for (const auto& [b, e] : pieces) {
      EXPECT_EQ(e - b, 100);
      EXPECT_EQ(b % 100, 0);
      EXPECT_TRUE(e <= 800 || b >= 800) << b << ".." << e;
    }
  }
}

TEST(SplitRange, EvenAndCovering) {
  int64_t next = 0;
  for (int i = 0; i < 3; ++i) {
    int64_t b, e;
    SplitRange(10, i, 3, &b, &e);
    EXPECT_EQ(b, next);
    EXPECT_GE(e - b, 3);
    next = e;
  }
  EXPECT_EQ(next, 10);
}

}  // namespace
}  // namespace cohort
