// A small leveled logger that writes to a FILE* (stderr by default). Library code logs
// through the Logger in its Context and never prints to stdout.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>

#include <fmt/format.h>

namespace cohort {

// The time a log line carries: UTC, ISO 8601 with milliseconds ("2026-01-02T03:04:05.678Z").
std::string LogTimestamp();

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::kWarn, std::FILE* out = stderr, std::string tag = "")
      : level_(level), out_(out), tag_(std::move(tag)) {}

  void set_level(LogLevel level) { level_ = level; }
  LogLevel level() const { return level_; }

  template <typename... Args>
  void Log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
    if (level < level_) return;
    Write(level, fmt::format(format, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... a) { Log(LogLevel::kDebug, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... a) { Log(LogLevel::kInfo, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void Warn(fmt::format_string<Args...> f, Args&&... a) { Log(LogLevel::kWarn, f, std::forward<Args>(a)...); }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... a) { Log(LogLevel::kError, f, std::forward<Args>(a)...); }

  // A line written at any level but kOff, labelled `label` instead of a level: records an
  // operator always wants (the request log), not diagnostics.
  void Record(const char* label, const std::string& line) {
    if (level_ != LogLevel::kOff) Write(label, line);
  }

 private:
  void Write(LogLevel level, const std::string& line);
  void Write(const char* label, const std::string& line);

  LogLevel level_;
  std::FILE* out_;
  std::string tag_;
  std::mutex mutex_;
};

}  // namespace cohort
