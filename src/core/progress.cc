// ProgressMeter and the progress figures' text; see progress.h.
#include "core/progress.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace cohort {

double ProgressFigures::percent() const {
  if (bytes_total == 0) return 0;
  return std::min(100.0, 100.0 * static_cast<double>(bytes_done) / static_cast<double>(bytes_total));
}

std::string FormatProgress(const ProgressFigures& f) {
  std::string text = fmt::format("{:.1f}% {:.1f} MB of {}, {:.1f} MB/s", f.percent(), f.bytes_done / 1e6,
                                 f.bytes_total > 0 ? fmt::format("{:.1f} MB", f.bytes_total / 1e6) : std::string("?"),
                                 f.rate_bytes_per_s / 1e6);
  if (f.eta_s >= 0) text += fmt::format(", {:.0f} s left", std::ceil(f.eta_s));
  return text;
}

ProgressFigures FiguresOf(uint64_t done, uint64_t total, double elapsed_s) {
  ProgressFigures f;
  f.bytes_done = done;
  f.bytes_total = total;
  f.rate_bytes_per_s = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  if (total > 0 && done >= total) {
    f.eta_s = 0;
  } else if (total > 0 && f.rate_bytes_per_s > 0) {
    f.eta_s = static_cast<double>(total - done) / f.rate_bytes_per_s;
  }
  return f;
}

void ProgressMeter::MarkStarted() {
  uint64_t expected = 0;
  start_ns_.compare_exchange_strong(expected, std::max<uint64_t>(1, clock_.MonotonicNs()));
}

void ProgressMeter::Start(uint64_t bytes_total) {
  total_.store(bytes_total);
  MarkStarted();
}

void ProgressMeter::Add(uint64_t bytes) {
  MarkStarted();
  done_.fetch_add(bytes);
}

void ProgressMeter::Set(uint64_t bytes_done) {
  MarkStarted();
  done_.store(bytes_done);
}

void ProgressMeter::Finish() { done_.store(total_.load()); }

ProgressFigures ProgressMeter::Figures() const {
  const uint64_t start = start_ns_.load();
  const double elapsed = start == 0 ? 0 : static_cast<double>(clock_.MonotonicNs() - start) / 1e9;
  return FiguresOf(done_.load(), total_.load(), elapsed);
}

}  // namespace cohort
