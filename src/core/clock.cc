// RealClock and ManualClock (see clock.h).
#include "core/clock.h"

#include "core/check.h"

namespace cohort {

uint64_t RealClock::MonotonicNs() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

uint64_t RealClock::WallMs() const {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

const Clock& Clock::Real() {
  static const RealClock clock;
  return clock;
}

// Monotonic time starts at one second rather than zero, so "last seen at 0" can never be
// mistaken for "just now" by code that treats 0 as unset.
ManualClock::ManualClock() : monotonic_ns_(1'000'000'000), wall_ms_(Clock::Real().WallMs()) {}

void ManualClock::Advance(std::chrono::milliseconds by) {
  COHORT_CHECK(by.count() >= 0);  // time never runs backwards, or it would not be monotonic
  const auto ms = static_cast<uint64_t>(by.count());
  monotonic_ns_.fetch_add(ms * 1'000'000, std::memory_order_acq_rel);
  wall_ms_.fetch_add(ms, std::memory_order_acq_rel);
}

}  // namespace cohort
