// The benchmark runs end to end between two processes and reports sane timings (the 1.5×
// target itself is checked by `cohort bench --comm`, not here: a shared CI machine is too noisy).
#include <gtest/gtest.h>

#include "comm/comm_bench.h"

namespace cohort::comm {
namespace {

TEST(CommBenchTest, MeasuresTcpAndShmAgainstRawBaselines) {
  CommBenchOptions options;
  options.iterations = 200;
  options.warmup = 20;
  auto result = MeasureComm(options);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
#ifdef COHORT_HAVE_UCX
  ASSERT_EQ(result->rows.size(), 8u);
#else
  ASSERT_EQ(result->rows.size(), 6u);
#endif
  for (const CommBenchRow& row : result->rows) {
    EXPECT_GT(row.median_us, 0.0) << row.name;
    EXPECT_LE(row.median_us, row.p90_us) << row.name;
  }
  EXPECT_GT(result->tcp_ratio, 0.0);
  EXPECT_GT(result->shm_ratio, 0.0);
  const std::string report = FormatCommBench(options, *result);
  EXPECT_NE(report.find("tcp all-reduce"), std::string::npos);
  EXPECT_NE(report.find("shm raw exchange"), std::string::npos);
  std::printf("%s", report.c_str());
}

}  // namespace
}  // namespace cohort::comm
