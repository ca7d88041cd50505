// Progress of a task that moves bytes (a share streamed to a worker, a model read from disk):
// a meter any thread adds to, and the figures a user reads from it — bytes done of the total,
// percent, rate and time left — with their one-line text, the same in logs, the CLI and the
// API.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "core/clock.h"

namespace cohort {

struct ProgressFigures {
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;     // 0: not known yet
  double rate_bytes_per_s = 0;  // since the task started
  double eta_s = -1;            // -1: not known (no rate yet, or no total)
  double percent() const;       // 0..100; 0 without a total
};

// "42.0% 12.3 MB of 29.1 MB, 4.1 MB/s, 4 s left".
std::string FormatProgress(const ProgressFigures& figures);

// Thread-safe: one thread adds, any reads. Rate and time left are over the time since the
// first Start() or Add().
class ProgressMeter {
 public:
  explicit ProgressMeter(const Clock& clock = Clock::Real()) : clock_(clock) {}
  void Start(uint64_t bytes_total);
  void Add(uint64_t bytes);
  void Set(uint64_t bytes_done);
  void Finish();  // done = total
  ProgressFigures Figures() const;

 private:
  void MarkStarted();
  const Clock& clock_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_{0};
  std::atomic<uint64_t> start_ns_{0};  // 0: not started
};

// Figures of `done` of `total` bytes moved over `elapsed_s` seconds.
ProgressFigures FiguresOf(uint64_t done, uint64_t total, double elapsed_s);

}  // namespace cohort
