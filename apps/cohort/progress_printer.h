// ProgressPrinter: how the CLI shows a long transfer on stderr — a bar redrawn in place on a
// terminal (at most 10 times a second); elsewhere (logs, CI, a pipe) a plain line every 10% or
// 5 s, and at the end.
#pragma once

#include <chrono>
#include <string>

#include "core/progress.h"

namespace cohort::app {

class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string command);  // "pull": lines start "cohort pull: "
  // `what`: a word before the figures ("transfer", "load"), may be empty.
  void Show(const ProgressFigures& figures, const std::string& what = "");
  void Say(const std::string& line);  // a line of its own (ends a bar being drawn)
  void End();

 private:
  std::string command_;
  bool tty_;
  bool drawing_ = false;
  double last_pct_ = -100;
  std::string last_what_;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace cohort::app
