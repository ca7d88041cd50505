// Status names and the abort path of COHORT_CHECK.
#include "core/status.h"

#include <cstdio>
#include <cstdlib>

namespace cohort {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kCorrupt: return "corrupt";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kIo: return "i/o error";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

namespace internal {
void CheckFailed(const char* file, int line, const char* condition, const std::string& values) {
  std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file, line, condition,
               values.empty() ? "" : " (", values.empty() ? "" : (values + ")").c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace internal

}  // namespace cohort
