// Stop-string matching with hold-back. The held text is always short (shorter than the
// longest stop string), so each push costs O(held + pushed) times the number of stops.
#include "engine/stop.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace cohort::engine {

Status ValidateStopStrings(const std::vector<std::string>& stops) {
  if (stops.size() > kMaxStopStrings) {
    return InvalidArgument("at most " + std::to_string(kMaxStopStrings) + " stop strings, got " +
                           std::to_string(stops.size()));
  }
  for (const auto& s : stops) {
    if (s.empty()) return InvalidArgument("a stop string is empty");
    if (s.size() > kMaxStopBytes) {
      return InvalidArgument("a stop string is longer than " + std::to_string(kMaxStopBytes) +
                             " bytes");
    }
    if (!tokenizer::IsValidUtf8(s)) return InvalidArgument("a stop string is not valid UTF-8");
  }
  return Status::Ok();
}

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  COHORT_CHECK(ValidateStopStrings(stops_).ok());
  size_t longest = 0;
  for (const auto& s : stops_) longest = std::max(longest, s.size());
  held_.reserve(2 * longest);
}

const std::string& StopMatcher::matched() const {
  COHORT_CHECK(stopped());
  return stops_[matched_];
}

size_t StopMatcher::PartialSuffix() const {
  size_t best = 0;
  for (const auto& stop : stops_) {
    // Longest k < stop.size() with held_ ending in stop[0, k).
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > best; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(stop).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

void StopMatcher::Push(std::string_view text, std::string& out) {
  if (stopped() || text.empty()) return;
  held_.append(text);
  // The earliest occurrence wins; on a tie, the stop listed first. The held text holds no
  // complete stop string (it would have matched earlier), so searching all of it is exact.
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = held_.find(stops_[i]);
    if (pos < best_pos) {
      best_pos = pos;
      matched_ = static_cast<int>(i);
    }
  }
  if (best_pos != std::string::npos) {
    out.append(held_, 0, best_pos);
    held_.clear();
    return;
  }
  // A stop string's prefix starts with a UTF-8 lead byte (stops are valid UTF-8), so the
  // split falls on a character boundary of valid text.
  const size_t keep = PartialSuffix();
  out.append(held_, 0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
}

void StopMatcher::Flush(std::string& out) {
  if (stopped()) return;
  out.append(held_);
  held_.clear();
}

}  // namespace cohort::engine
