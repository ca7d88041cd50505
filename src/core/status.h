// Status and Result<T>: how expected failures (bad input, I/O, a vanished peer) travel
// between layers. Programmer errors use COHORT_CHECK (check.h) instead.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace cohort {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is wrong (bad flag, bad HTTP body, bad token id)
  kCorrupt,           // a file or message is malformed
  kNotFound,          // a file, key, tensor or model is missing
  kUnsupported,       // valid input that this build does not handle (unknown arch, type)
  kOutOfRange,        // a limit was hit (context length, queue size, body size)
  kResourceExhausted, // out of memory, slots, or queue capacity
  kIo,                // the operating system said no
  kTimeout,           // a bounded wait ran out
  kUnavailable,       // a peer is gone or not ready
  kCancelled,         // the caller gave up
  kInternal,          // an invariant we could check without aborting was broken
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corrupt: tensor 'x' runs past the end of the file"
  std::string ToString() const;

  // Prefix the message with where the failure happened, keeping the code.
  Status Annotate(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIo, std::move(m)}; }
inline Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    COHORT_CHECK(!status_.ok());
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    COHORT_CHECK(ok());
    return *value_;
  }
  const T& value() const& {
    COHORT_CHECK(ok());
    return *value_;
  }
  T&& value() && {
    COHORT_CHECK(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace cohort

#define COHORT_CONCAT_INNER(a, b) a##b
#define COHORT_CONCAT(a, b) COHORT_CONCAT_INNER(a, b)

// Return the Status from the enclosing function if `expr` failed.
#define COHORT_RETURN_IF_ERROR(expr)              \
  do {                                            \
    ::cohort::Status cohort_status_ = (expr);     \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (0)

// `COHORT_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a Result or returns its Status.
#define COHORT_ASSIGN_OR_RETURN(lhs, expr) \
  COHORT_ASSIGN_OR_RETURN_IMPL(COHORT_CONCAT(cohort_result_, __LINE__), lhs, expr)
#define COHORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
