// ApiKeys: named keys from flags and a file, a file that does not parse is refused by line
// (never quoting a key) and leaves the old keys in place on reload, revoked keys stop
// matching, and the per-key rate limit refuses past its burst and refills with time.
#include "server/api_keys.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace cohort::server {
namespace {

struct KeyFile {
  std::string path = (std::filesystem::temp_directory_path() / ("cohort-keys-" + std::to_string(::getpid()))).string();
  ~KeyFile() { std::filesystem::remove(path); }
  void Write(const std::string& text) const { std::ofstream(path) << text; }
};

TEST(ApiKeys, NamesFromFlagsAndFile) {
  KeyFile f;
  f.Write("# comment\n\nalice   sk-alice-000000\r\nbob sk-bob-0000000\n");
  auto keys = ApiKeys::Load({"flag-key"}, f.path, {});
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ((*keys)->size(), 3u);
  EXPECT_EQ((*keys)->Match("Bearer flag-key").value_or(""), "key1");
  EXPECT_EQ((*keys)->Match("Bearer sk-alice-000000").value_or(""), "alice");
  EXPECT_EQ((*keys)->Match("Bearer sk-bob-0000000").value_or(""), "bob");
  EXPECT_FALSE((*keys)->Match("Bearer sk-bob-000000").has_value());   // a prefix
  EXPECT_FALSE((*keys)->Match("Bearer sk-bob-00000000").has_value()); // longer
  EXPECT_FALSE((*keys)->Match("sk-bob-0000000").has_value());         // no scheme
  EXPECT_FALSE((*keys)->Match("").has_value());
}

TEST(ApiKeys, BadFilesAreRefusedByLineWithoutQuotingKeys) {
  KeyFile f;
  for (const char* text : {"alice\n", "alice sk-alice-000000 extra\n", "al/ce sk-alice-000000\n",
                           "alice short\n", "alice sk-alice-000000\nalice sk-other-000000\n",
                           "alice sk-alice-000000\nbob sk-alice-000000\n"}) {
    f.Write(text);
    auto keys = ApiKeys::Load({}, f.path, {});
    ASSERT_FALSE(keys.ok()) << text;
    EXPECT_NE(keys.status().message().find("line"), std::string::npos) << keys.status().ToString();
    EXPECT_EQ(keys.status().message().find("sk-"), std::string::npos) << keys.status().ToString();
  }
  EXPECT_FALSE(ApiKeys::Load({}, f.path + ".missing", {}).ok());
}

TEST(ApiKeys, ReloadRevokesAndABrokenFileKeepsTheOldKeys) {
  KeyFile f;
  f.Write("alice sk-alice-000000\nbob sk-bob-0000000\n");
  auto keys = ApiKeys::Load({}, f.path, {});
  ASSERT_TRUE(keys.ok());
  f.Write("alice sk-alice-000000\ncarol sk-carol-000000\n");
  ASSERT_TRUE((*keys)->Reload().ok());
  EXPECT_FALSE((*keys)->Match("Bearer sk-bob-0000000").has_value());
  EXPECT_EQ((*keys)->Match("Bearer sk-carol-000000").value_or(""), "carol");
  f.Write("garbage\n");
  EXPECT_FALSE((*keys)->Reload().ok());
  EXPECT_EQ((*keys)->Match("Bearer sk-carol-000000").value_or(""), "carol");
}

TEST(ApiKeys, RateLimitPerKey) {
  auto keys = ApiKeys::Load({"k"}, "", {20.0, 3.0});
  ASSERT_TRUE(keys.ok());
  double retry = 0;
  for (int i = 0; i < 3; ++i) EXPECT_TRUE((*keys)->Admit("a", &retry)) << i;
  EXPECT_FALSE((*keys)->Admit("a", &retry));
  EXPECT_GT(retry, 0.0);
  EXPECT_LE(retry, 0.05 + 1e-9);
  EXPECT_TRUE((*keys)->Admit("b", &retry)) << "another key has its own allowance";
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // 20/s: two more
  EXPECT_TRUE((*keys)->Admit("a", &retry));
  auto unlimited = ApiKeys::Load({}, "", {});
  ASSERT_TRUE(unlimited.ok());
  EXPECT_TRUE((*unlimited)->open());
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE((*unlimited)->Admit("a", &retry));
  EXPECT_FALSE(ApiKeys::Load({}, "", {-1.0, 0.0}).ok());
}

}  // namespace
}  // namespace cohort::server
