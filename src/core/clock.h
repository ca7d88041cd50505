// The time a component reads, passed in (through Context or its options) instead of called
// from std::chrono, so a test can own time: a RealClock for production and a ManualClock that
// a test moves forward by hand. Waits that block a thread (poll, condition variables) still
// sleep in real time; what reads a Clock is what decides from elapsed time, such as liveness.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace cohort {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic nanoseconds since an arbitrary start: for intervals and timeouts.
  virtual uint64_t MonotonicNs() const = 0;
  uint64_t MonotonicMs() const { return MonotonicNs() / 1'000'000; }
  // Unix milliseconds: for stamps that another machine compares with its own clock.
  virtual uint64_t WallMs() const = 0;

  // A RealClock: what a Context or options hold unless a test injects another. It has no
  // state, so sharing one instance is no hidden global.
  static const Clock& Real();
};

// std::chrono::steady_clock and system_clock.
class RealClock final : public Clock {
 public:
  uint64_t MonotonicNs() const override;
  uint64_t WallMs() const override;
};

// Time that moves only when Advance is called; both readings move together. Safe to read from
// any thread while one thread advances it. Wall time starts at the real wall time, so stamps
// it makes stay inside other nodes' replay windows until a test moves it far.
class ManualClock final : public Clock {
 public:
  ManualClock();
  uint64_t MonotonicNs() const override { return monotonic_ns_.load(std::memory_order_acquire); }
  uint64_t WallMs() const override { return wall_ms_.load(std::memory_order_acquire); }
  void Advance(std::chrono::milliseconds by);

 private:
  std::atomic<uint64_t> monotonic_ns_;
  std::atomic<uint64_t> wall_ms_;
};

}  // namespace cohort
