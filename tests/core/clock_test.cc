// The clocks: the real one runs forward on its own; the manual one moves only when told, its
// monotonic and wall readings together, and may be read from other threads meanwhile.
#include <gtest/gtest.h>

#include <thread>

#include "core/clock.h"

namespace cohort {
namespace {

TEST(Clock, RealRunsForward) {
  const Clock& clock = Clock::Real();
  const uint64_t start_ns = clock.MonotonicNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_GE(clock.MonotonicNs() - start_ns, 2'000'000u);
  // Unix milliseconds: after 2020-01-01 (1577836800000).
  EXPECT_GT(clock.WallMs(), 1'577'836'800'000u);
}

TEST(Clock, ManualMovesOnlyWhenAdvanced) {
  ManualClock clock;
  const uint64_t ms = clock.MonotonicMs();
  const uint64_t wall = clock.WallMs();
  EXPECT_GT(ms, 0u);  // 0 is left to mean "never"
  EXPECT_NEAR(static_cast<double>(wall), static_cast<double>(Clock::Real().WallMs()), 5000.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(clock.MonotonicMs(), ms);
  EXPECT_EQ(clock.WallMs(), wall);
  clock.Advance(std::chrono::milliseconds(1500));
  EXPECT_EQ(clock.MonotonicMs(), ms + 1500);
  EXPECT_EQ(clock.MonotonicNs(), (ms + 1500) * 1'000'000);
  EXPECT_EQ(clock.WallMs(), wall + 1500);
}

TEST(Clock, ManualIsReadSafelyWhileAdvanced) {
  ManualClock clock;
  const uint64_t start = clock.MonotonicMs();
  std::thread reader([&] {
    uint64_t last = start;
    for (int i = 0; i < 100000; ++i) {
      const uint64_t now = clock.MonotonicMs();
      ASSERT_GE(now, last);  // never backwards, whatever the interleaving
      last = now;
    }
  });
  for (int i = 0; i < 1000; ++i) clock.Advance(std::chrono::milliseconds(1));
  reader.join();
  EXPECT_EQ(clock.MonotonicMs(), start + 1000);
}

}  // namespace
}  // namespace cohort
