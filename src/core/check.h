// Always-on assertions for programmer errors. They abort with the file, line, condition and
// the compared values; expected failures use Status instead (status.h).
#pragma once

#include <sstream>
#include <string>

namespace cohort::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              const std::string& values);

template <typename A, typename B>
std::string FormatPair(const A& a, const B& b) {
  std::ostringstream out;
  out << a << " vs " << b;
  return out.str();
}
}  // namespace cohort::internal

#define COHORT_CHECK(cond)                                                     \
  do {                                                                         \
    if (!(cond)) ::cohort::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)

#define COHORT_CHECK_OP(a, b, op)                                                      \
  do {                                                                                 \
    const auto& cohort_a_ = (a);                                                       \
    const auto& cohort_b_ = (b);                                                       \
    if (!(cohort_a_ op cohort_b_))                                                     \
      ::cohort::internal::CheckFailed(__FILE__, __LINE__, #a " " #op " " #b,           \
                                      ::cohort::internal::FormatPair(cohort_a_, cohort_b_)); \
  } while (0)

#define COHORT_CHECK_EQ(a, b) COHORT_CHECK_OP(a, b, ==)
#define COHORT_CHECK_NE(a, b) COHORT_CHECK_OP(a, b, !=)
#define COHORT_CHECK_LT(a, b) COHORT_CHECK_OP(a, b, <)
#define COHORT_CHECK_LE(a, b) COHORT_CHECK_OP(a, b, <=)
#define COHORT_CHECK_GT(a, b) COHORT_CHECK_OP(a, b, >)
#define COHORT_CHECK_GE(a, b) COHORT_CHECK_OP(a, b, >=)
