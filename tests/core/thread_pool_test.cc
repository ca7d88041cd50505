// ThreadPool: every index is visited exactly once, for many sizes and repeated calls.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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
