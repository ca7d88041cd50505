// llama.cpp's tests/test-tokenizer-1-spm on ggml-vocab-llama-spm.gguf: every token's text
// survives detokenize -> tokenize(parse_special) -> detokenize (special tokens rendered, as
// common_detokenize does by default), and so does every Unicode code point.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace cohort::tokenizer {
namespace {

std::unique_ptr<Tokenizer> LoadSpm() {
  const std::string path = std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-llama-spm.gguf";
  EXPECT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run scripts/fetch-test-data.sh";
  if (!std::filesystem::exists(path)) return nullptr;
  auto file = gguf::File::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status().ToString();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SpmRoundTrip, EveryToken) {
  auto tok = LoadSpm();
  ASSERT_NE(tok, nullptr);
  int failures = 0;
  for (int32_t id = 0; id < tok->n_vocab() && failures < 10; ++id) {
    const std::string text = tok->Decode(std::vector<int32_t>{id}, true);
    const std::string check = tok->Decode(tok->Encode(text, false, true), true);
    if (check != text) {
      ++failures;
      ADD_FAILURE() << "token " << id << " '" << text << "' comes back as '" << check << "'";
    }
  }
}

TEST(SpmRoundTrip, EveryCodePoint) {
  auto tok = LoadSpm();
  ASSERT_NE(tok, nullptr);
  int failures = 0;
  for (uint32_t cp = 0; cp < 0x110000 && failures < 10; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x40000 && cp <= 0xE0000)) continue;
    if (cp == 0x2581) continue;  // "▁" is the escaped space itself
    const std::string text = EncodeUtf8(cp);
    const std::string check = tok->Decode(tok->Encode(text, false, true), true);
    if (check != text) {
      ++failures;
      ADD_FAILURE() << "code point " << cp << " comes back as '" << check << "'";
    }
  }
}

}  // namespace
}  // namespace cohort::tokenizer

namespace cohort::tokenizer {
namespace {

// Byte-level BPE without clean-up of spaces: code points (each as one string) round-trip.
// Every 7th code point keeps the test to about a second; the stride is prime so all byte
// patterns and planes are still visited.
TEST(BpeRoundTrip, Qwen2EveryCodePoint) {
  const std::string path = std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-qwen2.gguf";
  ASSERT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run scripts/fetch-test-data.sh";
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  int failures = 0;
  for (uint32_t cp = 0; cp < 0x110000 && failures < 10; cp += 7) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || (cp >= 0x40000 && cp <= 0xE0000)) continue;
    const std::string text = EncodeUtf8(cp);
    const std::string check = (*tok)->Decode((*tok)->Encode(text, false, true), true);
    if (check != text) {
      ++failures;
      ADD_FAILURE() << "code point " << cp << " comes back as '" << check << "'";
    }
  }
}

}  // namespace
}  // namespace cohort::tokenizer
