// The SIMD level names and COHORT_SIMD. ctest runs this binary once per value of COHORT_SIMD
// in tests/kernels/CMakeLists.txt (unset, a level every CPU runs, levels some CPUs lack, a
// name that is no level); each run checks what BestSimdLevel and SimdOverrideStatus make of
// the value it got, whatever the CPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/quant.h"

namespace cohort::kernels {
namespace {

constexpr SimdLevel kAllLevels[] = {SimdLevel::kScalar, SimdLevel::kAvx2,    SimdLevel::kAvxVnni,
                                    SimdLevel::kAvx512, SimdLevel::kNeonDot, SimdLevel::kNeonI8mm};

TEST(SimdLevel, EveryNameParsesBackToItsLevel) {
  for (SimdLevel level : kAllLevels) {
    SimdLevel parsed = SimdLevel::kScalar;
    ASSERT_TRUE(ParseSimdLevel(SimdLevelName(level), &parsed)) << SimdLevelName(level);
    EXPECT_EQ(parsed, level) << SimdLevelName(level);
  }
  EXPECT_STREQ(SimdLevelName(SimdLevel::kAvx2), "avx2");
  EXPECT_STREQ(SimdLevelName(SimdLevel::kAvxVnni), "avx_vnni");
  EXPECT_STREQ(SimdLevelName(SimdLevel::kNeonI8mm), "neon_i8mm");
  SimdLevel alias = SimdLevel::kScalar;
  ASSERT_TRUE(ParseSimdLevel("neon-dotprod", &alias));  // the name bench notes used before
  EXPECT_EQ(alias, SimdLevel::kNeonDot);
}

TEST(SimdLevel, NamesThatAreNoLevelAreRefusedAndLeaveTheOutputAlone) {
  for (const char* bad : {"", "AVX2", "avx", "avx-vnni", "avx512vnni", "sse4", " scalar", "neon "}) {
    SimdLevel level = SimdLevel::kAvx512;
    EXPECT_FALSE(ParseSimdLevel(bad, &level)) << "'" << bad << "'";
    EXPECT_EQ(level, SimdLevel::kAvx512) << "'" << bad << "'";
  }
}

TEST(SimdLevel, SupportedLevelsStartWithScalarAndImplyTheirParts) {
  const auto levels = SupportedSimdLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), SimdLevel::kScalar);
  auto has = [&](SimdLevel l) { return std::find(levels.begin(), levels.end(), l) != levels.end(); };
  // AVX-VNNI and AVX-512 build on the AVX2 kernels, i8mm on the dot-product ones.
  if (has(SimdLevel::kAvxVnni) || has(SimdLevel::kAvx512)) {
    EXPECT_TRUE(has(SimdLevel::kAvx2));
  }
  if (has(SimdLevel::kNeonI8mm)) {
    EXPECT_TRUE(has(SimdLevel::kNeonDot));
  }
}

// What COHORT_SIMD (as this process got it) must make the kernels run at.
TEST(SimdLevel, CohortSimdPicksTheLevelOrSaysWhyNot) {
  const auto levels = SupportedSimdLevels();
  const SimdLevel cpu_best = levels.back();
  const char* env = std::getenv("COHORT_SIMD");
  const Status status = SimdOverrideStatus();
  SCOPED_TRACE(std::string("COHORT_SIMD=") + (env != nullptr ? env : "(unset)"));
  if (env == nullptr || *env == '\0') {
    EXPECT_TRUE(status.ok()) << status.ToString();
    EXPECT_EQ(BestSimdLevel(), cpu_best);
    return;
  }
  SimdLevel wanted = SimdLevel::kScalar;
  if (!ParseSimdLevel(env, &wanted)) {
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("not a SIMD level"), std::string::npos) << status.message();
    EXPECT_NE(status.message().find(env), std::string::npos) << status.message();
    EXPECT_EQ(BestSimdLevel(), cpu_best);  // refused: the kernels stay at the CPU's best
    return;
  }
  if (std::find(levels.begin(), levels.end(), wanted) == levels.end()) {
    ASSERT_FALSE(status.ok());
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find("cannot run"), std::string::npos) << status.message();
    // The message lists what the CPU does run.
    EXPECT_NE(status.message().find(SimdLevelName(cpu_best)), std::string::npos) << status.message();
    EXPECT_EQ(BestSimdLevel(), cpu_best);
    return;
  }
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(BestSimdLevel(), wanted);
}

}  // namespace
}  // namespace cohort::kernels
