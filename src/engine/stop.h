// Stop strings on a stream of text: finds a stop string even when it spans several pushes
// (tokens), and holds back any tail that could still become one, so a streaming client never
// sees part of a stop string. The emitted text never includes the stop string itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace cohort::engine {

// Checks a list of stop strings: each non-empty, valid UTF-8, at most kMaxStopBytes long, and
// at most kMaxStopStrings of them (bounds that keep the hold-back search cheap).
constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;
Status ValidateStopStrings(const std::vector<std::string>& stops);

class StopMatcher {
 public:
  // `stops` must pass ValidateStopStrings (checked).
  explicit StopMatcher(std::vector<std::string> stops);

  // Adds generated text; appends to `out` what may be shown now. Once a stop string is found,
  // appends the text before it, sets stopped(), and ignores further pushes.
  void Push(std::string_view text, std::string& out);
  // The generation ended without a stop string: appends whatever was held back.
  void Flush(std::string& out);

  bool stopped() const { return matched_ >= 0; }
  // The stop string that ended the text, or -1.
  int matched_index() const { return matched_; }
  const std::string& matched() const;
  // Bytes currently held back.
  size_t held() const { return held_.size(); }

 private:
  // Length of the longest suffix of held_ that is a proper prefix of some stop string.
  size_t PartialSuffix() const;

  std::vector<std::string> stops_;
  std::string held_;  // undecided text: a suffix that may still grow into a stop string
  int matched_ = -1;
};

}  // namespace cohort::engine
