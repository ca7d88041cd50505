// ProgressMeter: percent, rate and time left over a clock the test moves.
#include "core/progress.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(ProgressTest, RateAndTimeLeftFollowTheClock) {
  ManualClock clock;
  ProgressMeter meter(clock);
  EXPECT_EQ(meter.Figures().percent(), 0);
  EXPECT_LT(meter.Figures().eta_s, 0);  // nothing known yet
  meter.Start(1000);
  clock.Advance(std::chrono::seconds(2));
  meter.Add(250);
  const ProgressFigures f = meter.Figures();
  EXPECT_EQ(f.bytes_done, 250u);
  EXPECT_DOUBLE_EQ(f.percent(), 25);
  EXPECT_DOUBLE_EQ(f.rate_bytes_per_s, 125);
  EXPECT_DOUBLE_EQ(f.eta_s, 6);
  EXPECT_EQ(FormatProgress(f), "25.0% 0.0 MB of 0.0 MB, 0.0 MB/s, 6 s left");
  meter.Finish();
  EXPECT_DOUBLE_EQ(meter.Figures().percent(), 100);
  EXPECT_DOUBLE_EQ(meter.Figures().eta_s, 0);
}

TEST(ProgressTest, UnknownTotalSaysSo) {
  const ProgressFigures f = FiguresOf(3'000'000, 0, 1);
  EXPECT_EQ(f.percent(), 0);
  EXPECT_EQ(FormatProgress(f), "0.0% 3.0 MB of ?, 3.0 MB/s");
}

}  // namespace
}  // namespace cohort
