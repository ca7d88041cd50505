// DiscoveryWatch's decisions, with time passed in: nothing before the grace period, one
// warning per unanswered seed and for a lone node, repeats only a minute apart, a bad MAC
// warned once per host whatever its port, and a seed that answered (or is a member's
// advertised address) never warned about.
#include "cluster/discovery_watch.h"

#include <gtest/gtest.h>

namespace cohort::cluster {
namespace {

TEST(DiscoveryWatch, SilenceIsWarnedAboutAfterTheGraceAndRepeatedOnlyAMinuteLater) {
  DiscoveryWatch w({"10.0.0.2:7946", "10.0.0.3:7946"}, 1000, 10000);
  EXPECT_TRUE(w.Tick(5000, 0, {}).empty());
  const auto first = w.Tick(11000, 0, {});
  ASSERT_EQ(first.size(), 3u);
  EXPECT_NE(first[0].find("--peers 10.0.0.2:7946 has not answered in 10 s"), std::string::npos) << first[0];
  EXPECT_NE(first[1].find("--peers 10.0.0.3:7946"), std::string::npos);
  EXPECT_NE(first[2].find("alone for 10 s"), std::string::npos);
  EXPECT_TRUE(w.Tick(12000, 0, {}).empty());
  EXPECT_EQ(w.Tick(11000 + DiscoveryWatch::kRepeatMs, 0, {}).size(), 3u);
}

TEST(DiscoveryWatch, AnsweredSeedsAndPeersSilenceNothing) {
  DiscoveryWatch w({"10.0.0.2:7946", "10.0.0.3:7946"}, 0, 100);
  w.Heard("10.0.0.2:7946");
  // 10.0.0.3 is a member under its advertised address: it answered, through another path.
  EXPECT_TRUE(w.Tick(200, 1, {"10.0.0.3:7946"}).empty());
}

TEST(DiscoveryWatch, ABadMacIsWarnedOncePerHostWithItsAddress) {
  DiscoveryWatch w({}, 0, 100);
  const auto first = w.BadMac("10.0.0.9:7946", 0);
  ASSERT_TRUE(first.has_value());
  EXPECT_NE(first->find("from 10.0.0.9:7946"), std::string::npos);
  EXPECT_NE(first->find("different --secret"), std::string::npos);
  EXPECT_FALSE(w.BadMac("10.0.0.9:51000", 10).has_value());  // same host, a TCP port
  EXPECT_TRUE(w.BadMac("10.0.0.8:7946", 10).has_value());
  EXPECT_TRUE(w.BadMac("10.0.0.9:7946", DiscoveryWatch::kRepeatMs + 1).has_value());
}

}  // namespace
}  // namespace cohort::cluster
