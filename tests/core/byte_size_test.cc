// ParseByteSize: the sizes --max-memory takes, and what it refuses.
#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(ByteSize, PlainAndSuffixed) {
  EXPECT_EQ(ParseByteSize(""), 0);
  EXPECT_EQ(ParseByteSize("123"), 123);
  EXPECT_EQ(ParseByteSize("512K"), 512 * 1024);
  EXPECT_EQ(ParseByteSize("64m"), 64LL << 20);
  EXPECT_EQ(ParseByteSize("2G"), 2LL << 30);
  EXPECT_EQ(ParseByteSize("1.5G"), 3LL << 29);
}

TEST(ByteSize, MalformedIsMinusOne) {
  for (const char* bad : {"G", "12X", "1GB", "-5", "-1G", "abc", "1 G"}) EXPECT_EQ(ParseByteSize(bad), -1) << bad;
}

}  // namespace
}  // namespace cohort
