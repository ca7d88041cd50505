// Status/Result behaviour: codes, messages, annotation, and the return-on-error macros.
#include "core/status.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  COHORT_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Status, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Corrupt("bad magic");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_EQ(s.ToString(), "corrupt: bad magic");
  EXPECT_EQ(s.Annotate("model.gguf").message(), "model.gguf: bad magic");
}

TEST(Result, PropagatesErrors) {
  EXPECT_EQ(Quarter(8).value(), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

TEST(Check, AbortsWithValues) {
  EXPECT_DEATH({ COHORT_CHECK_EQ(1 + 1, 3); }, "1 \\+ 1 == 3 \\(2 vs 3\\)");
}

}  // namespace
}  // namespace cohort
