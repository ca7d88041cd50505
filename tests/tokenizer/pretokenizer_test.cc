// Pre-tokenizer regex cascades: llama.cpp's splitting semantics on top of PCRE2 (pieces and
// gaps, per-piece matching, `$` at piece end only, its whitespace set, invalid UTF-8).
#include <gtest/gtest.h>

#include "tokenizer/pretokenizer.h"

namespace cohort::tokenizer {
namespace {

using Words = std::vector<std::string>;

Words Split(std::string_view pre, std::string_view text) {
  auto spec = LookupPreTokenizer(pre);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  auto compiled = PreTokenizer::Compile(spec->patterns);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled->Split(text);
}

Words SplitWith(std::vector<std::string> patterns, std::string_view text) {
  auto compiled = PreTokenizer::Compile(patterns);
  EXPECT_TRUE(compiled.ok()) << compiled.status().ToString();
  return compiled->Split(text);
}

TEST(PreTokenizer, Llama3Regex) {
  EXPECT_EQ(Split("llama-bpe", "Hello world  1234567"),
            (Words{"Hello", " world", " ", " ", "123", "456", "7"}));
  EXPECT_EQ(Split("llama-bpe", "a   b\n\n  c"), (Words{"a", "  ", " b", "\n\n", " ", " c"}));
  EXPECT_EQ(Split("llama-bpe", "I'LL don't"), (Words{"I", "'LL", " don", "'t"}));
  EXPECT_EQ(Split("llama-bpe", ""), Words{});
}

TEST(PreTokenizer, Gpt2AndCascade) {
  EXPECT_EQ(Split("gpt-2", "it's  33 apples!!"),
            (Words{"it", "'s", " ", " 33", " apples", "!!"}));
  // starcoder: digits are split first, then the GPT-2 regex runs inside each piece.
  EXPECT_EQ(Split("starcoder", "x 123"), (Words{"x", " ", "1", "2", "3"}));
}

TEST(PreTokenizer, NonAsciiWhitespaceIsWhitespace) {
  // U+3000 counts as \s (llama.cpp's whitespace set), so `\s+(?!\S)` leaves one for the word.
  EXPECT_EQ(Split("llama-bpe", "a\u3000\u3000b"), (Words{"a", "\u3000", "\u3000b"}));
}

TEST(PreTokenizer, DollarMeansEndOfPieceOnly) {
  // PCRE2's default `$` would also match before a final newline; ECMAScript's does not.
  EXPECT_EQ(SplitWith({"b$"}, "ab\n"), Words{"ab\n"});
  EXPECT_EQ(SplitWith({"b$"}, "ab"), (Words{"a", "b"}));
  EXPECT_EQ(Split("deepseek-llm", "x  "), (Words{"x", "  "}));
}

TEST(PreTokenizer, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(Split("llama-bpe", "a\xff" "b"), (Words{"a", "\xEF\xBF\xBD" "b"}));
  EXPECT_EQ(Split("qwen2", "\xc3"), Words{"\xEF\xBF\xBD"});
  // Surrogates decode (as in llama.cpp) and are re-encoded unchanged.
  EXPECT_EQ(Split("qwen2", "\xed\xa0\x80"), Words{"\xed\xa0\x80"});
  const Words long_run = Split("qwen2", std::string(5000, '\x80'));
  size_t total = 0;
  for (const auto& w : long_run) total += w.size();
  EXPECT_EQ(total, 5000u * 3);
}

TEST(PreTokenizer, UnknownNameIsUnsupported) {
  EXPECT_EQ(LookupPreTokenizer("kimi-k2").status().code(), StatusCode::kUnsupported);
  EXPECT_TRUE(LookupPreTokenizer("").ok());
  EXPECT_TRUE(LookupPreTokenizer("deepseek-v3").ok());
  auto spec = LookupPreTokenizer("llama3");
  ASSERT_TRUE(spec.ok());
  EXPECT_TRUE(spec->ignore_merges);
  EXPECT_TRUE(spec->add_bos);
}

TEST(PreTokenizer, EveryKnownCascadeCompiles) {
  for (const char* name : {"default", "llama3", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                           "falcon", "starcoder", "gpt-2", "qwen2", "qwen35", "bloom", "viking",
                           "tekken", "chameleon", "gpt-4o", "seed-coder", "bailingmoe"}) {
    auto spec = LookupPreTokenizer(name);
    ASSERT_TRUE(spec.ok()) << name;
    auto compiled = PreTokenizer::Compile(spec->patterns);
    EXPECT_TRUE(compiled.ok()) << name << ": " << compiled.status().ToString();
    if (compiled.ok()) {
      EXPECT_FALSE(compiled->Split("Hello, World 42!\n").empty()) << name;
    }
  }
}

}  // namespace
}  // namespace cohort::tokenizer
