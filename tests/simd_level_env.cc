// Linked into every test binary that ctest reruns once per SIMD level (cohort_add_simd_variants
// in tests/CMakeLists.txt sets COHORT_SIMD=<level> for each rerun). Before any test, it says
// which level the kernels run at, and skips the whole binary — visibly, with gtest's
// "[  SKIPPED ]" that ctest reports as a skip — when COHORT_SIMD names a level this CPU cannot
// run (the kernels would silently run at the CPU's best level, and a pass would prove nothing)
// or the CPU's best level, which the same tests without the _simd_ suffix already run.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/quant.h"

namespace cohort::kernels {
namespace {

class SimdLevelEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const char* forced = std::getenv("COHORT_SIMD");
    if (forced == nullptr || *forced == '\0') return;
    const Status status = SimdOverrideStatus();
    // gtest prints a skip from here as its bare message, so the message carries the marker
    // ctest's skip pattern looks for (gtest_discover_tests' SKIP_REGULAR_EXPRESSION).
    if (!status.ok()) GTEST_SKIP() << "[  SKIPPED ] " << status.message();
    const SimdLevel level = BestSimdLevel();
    if (level != SimdLevel::kScalar && level == SupportedSimdLevels().back()) {
      GTEST_SKIP() << "[  SKIPPED ] COHORT_SIMD=" << forced
                   << " is this CPU's best level, which the tests without COHORT_SIMD run";
    }
    std::printf("COHORT_SIMD=%s: the kernels run at level %s\n", forced, SimdLevelName(level));
  }
};

[[maybe_unused]] ::testing::Environment* const kSimdLevelEnvironment =
    ::testing::AddGlobalTestEnvironment(new SimdLevelEnvironment);

}  // namespace
}  // namespace cohort::kernels
