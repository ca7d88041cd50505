// Logger output: one line per message, prefixed with the level and the logger's tag.
#include "core/log.h"

namespace cohort {

void Logger::Write(LogLevel level, const std::string& line) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error", "off"};
  std::lock_guard<std::mutex> lock(mutex_);
  if (tag_.empty()) {
    std::fprintf(out_, "[%s] %s\n", kNames[static_cast<int>(level)], line.c_str());
  } else {
    std::fprintf(out_, "[%s] %s: %s\n", kNames[static_cast<int>(level)], tag_.c_str(), line.c_str());
  }
  std::fflush(out_);
}

}  // namespace cohort
