// Stop strings: matches inside one push and across pushes, hold-back of possible prefixes,
// and the streaming property that emitted text is never taken back.
#include "engine/stop.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tokenizer/utf8.h"

namespace cohort::engine {
namespace {

// Feeds pieces one by one; returns what was emitted after each push (then the flush).
std::vector<std::string> Feed(StopMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<std::string> emitted;
  for (const auto& p : pieces) {
    std::string out;
    m.Push(p, out);
    emitted.push_back(out);
  }
  std::string out;
  m.Flush(out);
  emitted.push_back(out);
  return emitted;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

TEST(StopStrings, Validation) {
  EXPECT_TRUE(ValidateStopStrings({}).ok());
  EXPECT_TRUE(ValidateStopStrings({"\n\n", "END", "\xC3\xA9"}).ok());
  EXPECT_FALSE(ValidateStopStrings({""}).ok());
  EXPECT_FALSE(ValidateStopStrings({"\xC3"}).ok());
  EXPECT_FALSE(ValidateStopStrings({std::string(kMaxStopBytes + 1, 'x')}).ok());
  EXPECT_FALSE(ValidateStopStrings(std::vector<std::string>(kMaxStopStrings + 1, "x")).ok());
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(Feed(m, {"a", "bc", "", "d"}), (std::vector<std::string>{"a", "bc", "", "d", ""}));
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, MatchInsideOnePushCutsBeforeIt) {
  StopMatcher m({"END"});
  std::string out;
  m.Push("hello END world", out);
  EXPECT_EQ(out, "hello ");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  m.Push("more", out);
  m.Flush(out);
  EXPECT_EQ(out, "hello ");
}

TEST(StopMatcher, MatchAcrossTokenBoundariesIsHeldBack) {
  StopMatcher m({"END"});
  const auto e = Feed(m, {"abc E", "N", "D tail"});
  EXPECT_EQ(e, (std::vector<std::string>{"abc ", "", "", ""}));
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, HeldTextIsReleasedWhenItCannotBeAStop) {
  StopMatcher m({"END"});
  const auto e = Feed(m, {"abc E", "N", "x", "E"});
  EXPECT_EQ(e, (std::vector<std::string>{"abc ", "", "ENx", "", "E"}));
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.held(), 0u);
}

TEST(StopMatcher, OverlappingPrefixes) {
  StopMatcher m({"aab"});
  const auto e = Feed(m, {"a", "a", "a", "b", "zzz"});
  EXPECT_EQ(Join(e), "a");
  EXPECT_TRUE(m.stopped());
}

TEST(StopMatcher, EarliestStopWinsThenListOrder) {
  StopMatcher m({"world", "lo w", "o"});
  std::string out;
  m.Push("hello world", out);
  EXPECT_EQ(out, "hel");
  EXPECT_EQ(m.matched_index(), 1);  // "lo w" starts at 3, before "o" at 4
}

TEST(StopMatcher, EarliestPositionAmongSeveral) {
  StopMatcher m({"world", "lo w"});
  std::string out;
  m.Push("hello world", out);
  EXPECT_EQ(out, "hel");
  EXPECT_EQ(m.matched_index(), 1);
  StopMatcher tie({"ab", "abc"});
  out.clear();
  tie.Push("xabc", out);
  EXPECT_EQ(out, "x");
  EXPECT_EQ(tie.matched_index(), 0);
}

TEST(StopMatcher, MultiByteStopAcrossPieces) {
  StopMatcher m({"\xC3\xA9t\xC3\xA9"});  // "été"
  const auto e = Feed(m, {"un \xC3\xA9", "t", "\xC3\xA9 chaud"});
  EXPECT_EQ(Join(e), "un ");
  EXPECT_TRUE(m.stopped());
  for (const auto& piece : e) EXPECT_TRUE(tokenizer::IsValidUtf8(piece));
}

// Every way of cutting a text into pieces gives the same result, emitted text is never taken
// back (each emission extends a prefix of the final text), and nothing emitted ever ends in a
// proper prefix of a stop string that a later piece completes.
TEST(StopMatcher, AnySplitGivesTheSameResult) {
  const std::vector<std::string> stops = {"<|end|>", "\n\n", "STOP"};
  const std::vector<std::string> texts = {
      "Once upon a time <|en there was <|end|> tail",
      "line one\nline two\n\nline three",
      "no stop string in here at all <| <|e ST STO",
      "STOP right at the start",
      "ends with a partial <|end",
  };
  std::mt19937 gen(3);
  for (const auto& text : texts) {
    // The reference: cut at the earliest occurrence of any stop.
    size_t cut = std::string::npos;
    for (const auto& s : stops) cut = std::min(cut, text.find(s));
    const std::string want = text.substr(0, cut);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<std::string> pieces;
      size_t i = 0;
      while (i < text.size()) {
        const size_t len = std::uniform_int_distribution<size_t>(1, 4)(gen);
        pieces.push_back(text.substr(i, len));
        i += len;
      }
      StopMatcher m(stops);
      std::string so_far;
      for (const auto& p : pieces) {
        std::string out;
        m.Push(p, out);
        so_far += out;
        ASSERT_EQ(want.compare(0, so_far.size(), so_far), 0) << "emitted text diverged: " << so_far;
      }
      std::string out;
      m.Flush(out);
      so_far += out;
      EXPECT_EQ(so_far, want);
      EXPECT_EQ(m.stopped(), cut != std::string::npos);
    }
  }
}

}  // namespace
}  // namespace cohort::engine
