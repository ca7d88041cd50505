// ProgressPrinter; see progress_printer.h.
#include "progress_printer.h"

#include <unistd.h>

#include <cstdio>

namespace cohort::app {

ProgressPrinter::ProgressPrinter(std::string command)
    : command_(std::move(command)), tty_(::isatty(STDERR_FILENO) == 1) {}

void ProgressPrinter::Show(const ProgressFigures& f, const std::string& what) {
  const auto now = std::chrono::steady_clock::now();
  const double pct = f.percent();
  const bool finished = f.bytes_total > 0 && f.bytes_done >= f.bytes_total;
  if (!tty_ && what == last_what_ && pct < last_pct_ + 10 && now < last_ + std::chrono::seconds(5) && !finished) return;
  if (!tty_ && finished && pct == last_pct_ && what == last_what_) return;  // said already
  // A bar is redrawn at most 10 times a second (a transfer reports every frame).
  if (tty_ && drawing_ && what == last_what_ && !finished && now < last_ + std::chrono::milliseconds(100)) return;
  last_pct_ = pct;
  last_what_ = what;
  last_ = now;
  const std::string figures = (what.empty() ? "" : what + " ") + FormatProgress(f);
  if (tty_) {
    const int filled = static_cast<int>(pct / 100 * 30);
    std::fprintf(stderr, "\r[%s%s] %s\033[K", std::string(filled, '=').c_str(), std::string(30 - filled, ' ').c_str(),
                 figures.c_str());
    drawing_ = true;
  } else {
    std::fprintf(stderr, "cohort %s: %s\n", command_.c_str(), figures.c_str());
  }
  std::fflush(stderr);
}

void ProgressPrinter::Say(const std::string& line) {
  End();
  std::fprintf(stderr, "cohort %s: %s\n", command_.c_str(), line.c_str());
}

void ProgressPrinter::End() {
  if (drawing_) std::fprintf(stderr, "\n");
  drawing_ = false;
}

}  // namespace cohort::app
