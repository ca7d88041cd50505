// Logger output: one line per message, prefixed with the UTC wall time (milliseconds), the
// level and the logger's tag, so lines from several nodes' logs can be put in one order.
#include "core/log.h"

#include <chrono>
#include <ctime>

namespace cohort {

std::string LogTimestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const int64_t ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &utc);
  return fmt::format("{}.{:03d}Z", text, static_cast<int>(ms));
}

void Logger::Write(LogLevel level, const std::string& line) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};
  Write(kNames[static_cast<int>(level)], line);
}

void Logger::Write(const char* label, const std::string& line) {
  const std::string time = LogTimestamp();
  std::lock_guard<std::mutex> lock(mutex_);
  if (tag_.empty()) {
    std::fprintf(out_, "%s [%s] %s\n", time.c_str(), label, line.c_str());
  } else {
    std::fprintf(out_, "%s [%s] %s: %s\n", time.c_str(), label, tag_.c_str(), line.c_str());
  }
  std::fflush(out_);
}

}  // namespace cohort
