// Metrics: the server's counters and the time-to-first-token histogram, rendered with the
// scheduler's state as Prometheus text (GET /metrics). Thread-safe.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "engine/scheduler.h"

namespace cohort::server {

class Metrics {
 public:
  using Clock = std::chrono::steady_clock;

  // One HTTP response, counted by path and status.
  void CountResponse(const std::string& path, int status);
  void ObserveTimeToFirstToken(double seconds);
  // Generated tokens, for the tokens/s gauge (a sliding window of whole seconds).
  void AddGeneratedTokens(int64_t n, Clock::time_point now = Clock::now());
  double TokensPerSecond(Clock::time_point now = Clock::now()) const;

  std::string Render(const engine::SchedulerStats& stats) const;

  static constexpr std::array<double, 12> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                         1.0,  2.5,   5.0,  10.0, 30.0, 60.0};

 private:
  static constexpr int kWindowSeconds = 10;
  static constexpr int kRing = kWindowSeconds + 2;

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::array<uint64_t, kTtftBuckets.size()> ttft_counts_{};  // per bucket, not cumulative
  uint64_t ttft_count_ = 0;
  double ttft_sum_ = 0.0;
  std::array<int64_t, kRing> tokens_by_second_{};
  std::array<int64_t, kRing> second_of_slot_{};
};

}  // namespace cohort::server
