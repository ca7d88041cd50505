// tokenizer/utf8: the strict checks applied to text leaving the engine, and the lenient
// decoding the tokenizer uses, side by side on the inputs where the two rules part.
#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace cohort::tokenizer {
namespace {

TEST(Utf8, Validity) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC3"));              // truncated
  EXPECT_FALSE(IsValidUtf8("\xA9"));              // lone continuation byte
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // past U+10FFFF
}

TEST(Utf8, SanitizeReplacesEachBadByte) {
  auto clean = [](std::string_view in) {
    std::string out = "<";
    AppendSanitizedUtf8(in, out);
    return out;
  };
  EXPECT_EQ(clean("caf\xC3\xA9"), "<caf\xC3\xA9");
  EXPECT_EQ(clean("a\xA9" "b"), "<a\xEF\xBF\xBD" "b");
  EXPECT_EQ(clean("\xC3"), "<\xEF\xBF\xBD");
  EXPECT_EQ(clean("\xE2\x82" "x"), "<\xEF\xBF\xBD\xEF\xBF\xBD" "x");
  EXPECT_EQ(clean("\xC0\xAF"), "<\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(clean("\xFF\xFE\xF0\x9F\x98")));
}

// llama.cpp's decoding passes overlong forms and surrogates that IsValidUtf8 rejects; only
// broken sequences and values past U+10FFFF become U+FFFD, one per bad byte.
TEST(Utf8, LenientDecodingKeepsOverlongsAndSurrogates) {
  using Cps = std::vector<uint32_t>;
  EXPECT_EQ(DecodeUtf8Lenient("caf\xC3\xA9"), (Cps{'c', 'a', 'f', 0xE9}));
  EXPECT_EQ(DecodeUtf8Lenient("\xF0\x9F\x98\x80"), (Cps{0x1F600}));
  EXPECT_EQ(DecodeUtf8Lenient("\xC0\xAF"), (Cps{0x2F}));
  EXPECT_EQ(DecodeUtf8Lenient("\xED\xA0\x80"), (Cps{0xD800}));
  EXPECT_EQ(DecodeUtf8Lenient("\xF4\x90\x80\x80"), (Cps{kReplacementChar}));
  EXPECT_EQ(DecodeUtf8Lenient("\xE2\x82" "x"), (Cps{kReplacementChar, kReplacementChar, 'x'}));
  EXPECT_EQ(DecodeUtf8Lenient("\xC3"), (Cps{kReplacementChar}));
  EXPECT_EQ(DecodeUtf8Lenient("\xF8\x80"), (Cps{kReplacementChar, kReplacementChar}));
}

}  // namespace
}  // namespace cohort::tokenizer
