// Tokenizer behaviour on the repository's own GGUFs (stories260K, the tiny-llama fixture) and
// on llama.cpp vocabularies: BOS rules, special-token parsing, pieces, detokenization,
// streaming, and hostile (invalid UTF-8) input.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto file = gguf::File::Open(path);
  EXPECT_TRUE(file.ok()) << path << ": " << file.status().ToString();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << path << ": " << tok.status().ToString();
  if (!tok.ok()) return nullptr;
  return std::move(tok).value();
}

std::unique_ptr<Tokenizer> Stories() {
  return Load(std::string(COHORT_TEST_DATA) + "/fixtures/models/stories260K.gguf");
}

// llama.cpp vocabularies fetched by scripts/fetch-test-data.sh; missing data is a failure.
std::unique_ptr<Tokenizer> External(const std::string& name) {
  const std::string path =
      std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-" + name + ".gguf";
  EXPECT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run scripts/fetch-test-data.sh";
  if (!std::filesystem::exists(path)) return nullptr;
  return Load(path);
}

TEST(Stories260K, GoldenPromptWithBos) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  // tests/data/fixtures/golden/stories260K.golden.json prompt_ids.
  EXPECT_EQ(tok->Encode("Once upon a time", true, false), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->Encode("Once upon a time", false, false), (Ids{403, 407, 261, 378}));
  EXPECT_TRUE(tok->IsEndOfGeneration(2));
  EXPECT_FALSE(tok->IsEndOfGeneration(1));
}

TEST(Stories260K, DecodeMatchesLlamaDetokenize) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  const Ids ids = {1, 403, 407, 261, 378};
  // BOS renders as nothing but still uses up the one leading-space removal.
  EXPECT_EQ(tok->Decode(ids, false), " Once upon a time");
  EXPECT_EQ(tok->Decode(ids, true), "<s> Once upon a time");
  EXPECT_EQ(tok->Decode(Ids{403, 407, 261, 378}, false), "Once upon a time");
  EXPECT_EQ(tok->TokenToPiece(403, false), " Once");
  EXPECT_EQ(tok->TokenToPiece(1, false), "");
  EXPECT_EQ(tok->TokenToPiece(1, true), "<s>");
  EXPECT_EQ(tok->TokenToPiece(3 + 0x41, false), "A");  // byte token <0x41>
  EXPECT_EQ(tok->TokenToPiece(-1, true), "");
  EXPECT_EQ(tok->TokenToPiece(512, true), "");
  EXPECT_EQ(tok->type(1), TokenType::kControl);
  EXPECT_EQ(tok->type(3), TokenType::kByte);
  EXPECT_EQ(tok->text(2), "</s>");
  EXPECT_EQ(tok->Find("<unk>"), 0);
}

TEST(Stories260K, ByteFallbackAndRoundTrip) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  // "😀" is not a piece of this 512-token vocab: its four UTF-8 bytes become byte tokens.
  EXPECT_EQ(tok->Encode("😀", false, false),
            (Ids{tok->Find("\xE2\x96\x81"), 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  for (const std::string text : {"Once upon a time, there was a dog.", "héllo wörld 😀 日本",
                                 "  two  spaces\nand a newline", "x"}) {
    EXPECT_EQ(tok->Decode(tok->Encode(text, false, false), false), text);
  }
}

TEST(Stories260K, SpecialTokenParsing) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  const Ids plain = tok->Encode("Once", false, false);  // "▁Once"
  // Control tokens are found in text only with parse_special; a space is prefixed to the text
  // after each special token, as llama.cpp's SPM path does.
  Ids expected = {1};
  expected.insert(expected.end(), plain.begin(), plain.end());
  expected.push_back(2);
  EXPECT_EQ(tok->Encode("<s>Once</s>", false, true), expected);
  const Ids literal = tok->Encode("<s>Once</s>", false, false);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 1), 0);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 2), 0);
  EXPECT_EQ(tok->Decode(literal, false), "<s>Once</s>");
}

TEST(TinyLlamaFixture, SyntheticSpmVocab) {
  // tests/data/fixtures/README.md: <unk>=0, <s>=1, </s>=2, <0x00>..<0xFF>=3..258, then normal
  // pieces; llama.cpp reports SPM with LF token 13 (= <0x0A>).
  auto tok = Load(std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->n_vocab(), 512);
  EXPECT_EQ(tok->bos(), 1);
  EXPECT_EQ(tok->eos(), 2);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_EQ(tok->type(0), TokenType::kUnknown);
  EXPECT_EQ(tok->type(258), TokenType::kByte);
  EXPECT_EQ(tok->Find("<0x0A>"), 13);
  const Ids ids = tok->Encode("Once upon a time\n", true, false);
  ASSERT_GE(ids.size(), 3u);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 13);  // the newline has no merged piece here, only its byte token
  EXPECT_EQ(tok->Decode(ids, false), " Once upon a time\n");
}

TEST(StreamDecoder, HoldsBackSplitCharacters) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  const std::string text = "aé€😀b";  // 1-, 2-, 3- and 4-byte characters
  const Ids ids = tok->Encode(text, false, false);
  StreamDecoder stream(*tok);
  std::string joined;
  size_t empty_pushes = 0;
  for (int32_t id : ids) {
    const std::string part = stream.Push(id);
    if (part.empty()) ++empty_pushes;
    // Every emitted chunk is whole characters: it must decode without a dangling lead byte.
    if (!part.empty()) {
      const auto last = static_cast<uint8_t>(part.back());
      EXPECT_TRUE(last < 0x80 || (last & 0xC0) == 0x80) << "chunk ends in a lead byte";
    }
    joined += part;
  }
  joined += stream.Flush();
  EXPECT_GT(empty_pushes, 0u);  // some byte tokens completed nothing on their own
  EXPECT_EQ(joined, " " + text);  // streaming keeps the encoder's prefix space, like the server
}

TEST(StreamDecoder, FlushEmitsIncompleteTail) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  StreamDecoder stream(*tok);
  EXPECT_EQ(stream.Push(3 + 0xE2), "");  // lead byte of a 3-byte character
  EXPECT_EQ(stream.Push(3 + 0x82), "");
  EXPECT_EQ(stream.Flush(), "\xE2\x82");
  EXPECT_EQ(stream.Push(3 + 0x41), "A");
}

TEST(HostileInput, InvalidUtf8Spm) {
  auto tok = Stories();
  ASSERT_NE(tok, nullptr);
  // SPM keeps the raw bytes: each invalid byte becomes its byte token.
  EXPECT_EQ(tok->Encode("\xff", false, false), (Ids{tok->Find("▁"), 3 + 0xFF}));
  for (const std::string& text : {std::string("\xff\xfe"), std::string("\xc3"),
                                 std::string("a\x80z"), std::string("\xed\xa0\x80"),
                                 std::string("\xf4\x90\x80\x80"), std::string("\xf7\xbf\xbf\xbf"),
                                 std::string("x\0y", 3), std::string(1000, '\xe2')}) {
    const Ids ids = tok->Encode(text, true, true);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok->Decode(ids, false), " " + text);
  }
}

TEST(HostileInput, InvalidUtf8BpeBecomesReplacementChar) {
  auto tok = External("llama-bpe");
  ASSERT_NE(tok, nullptr);
  // llama.cpp decodes text to code points before the regex split; a bad byte is U+FFFD.
  EXPECT_EQ(tok->Decode(tok->Encode("a\xff" "b", false, false), false), "a\xEF\xBF\xBD" "b");
  for (const std::string& text : {std::string("\xc3"), std::string("\xed\xa0\x80"),
                                 std::string("\xf7\xbf\xbf\xbf"), std::string(1000, '\x80'),
                                 std::string(" \xe2\x80\xa8 \xc2\x85\t"), std::string()}) {
    const Ids ids = tok->Encode(text, true, true);
    EXPECT_EQ(ids.empty(), false);  // at least the BOS
    for (int32_t id : ids) EXPECT_TRUE(id >= 0 && id < tok->n_vocab());
  }
}

TEST(Bpe, Llama3SpecialsAndPieces) {
  auto tok = External("llama-bpe");
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->bos(), 128000);
  EXPECT_TRUE(tok->add_bos());  // llama-bpe pre-tokenizer default
  EXPECT_EQ(tok->eot(), 128009);
  EXPECT_TRUE(tok->IsEndOfGeneration(128009));  // <|eot_id|>
  EXPECT_TRUE(tok->IsEndOfGeneration(128001));  // eos
  EXPECT_EQ(tok->Encode("Hello", true, false), (Ids{128000, 9906}));
  EXPECT_EQ(tok->Encode("<|eot_id|>", false, true), (Ids{128009}));
  EXPECT_NE(tok->Encode("<|eot_id|>", false, false), (Ids{128009}));
  EXPECT_EQ(tok->TokenToPiece(22691, false), " Hello");
  EXPECT_EQ(tok->TokenToPiece(128009, false), "");
  EXPECT_EQ(tok->TokenToPiece(128009, true), "<|eot_id|>");
  // clean_up_tokenization_spaces: " ," " ' " " 's" lose their spaces.
  EXPECT_EQ(tok->Decode(tok->Encode("a , b ' c 's", false, false), false), "a, b'c's");
}

TEST(Bpe, Qwen2KeepsSpacesAndRoundTrips) {
  auto tok = External("qwen2");
  ASSERT_NE(tok, nullptr);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_EQ(tok->Find("<|im_end|>"), 151645);
  EXPECT_TRUE(tok->IsEndOfGeneration(151645));
  EXPECT_TRUE(tok->IsControl(151645));
  for (const std::string text : {"a , b ' c 's", "Hello, y'all! 😁 我想在apple工作1314151天～",
                                 "   \n\n\t  x  ", "<|im_start|>user"}) {
    EXPECT_EQ(tok->Decode(tok->Encode(text, true, false), false), text);
  }
  EXPECT_EQ(tok->Encode("<|im_start|>user", false, true).front(), tok->Find("<|im_start|>"));
}

TEST(FromVocab, RejectsWhatItCannotHandle) {
  VocabData data;
  data.model = "bert";
  data.tokens = {"a"};
  EXPECT_EQ(Tokenizer::FromVocab(data).status().code(), StatusCode::kUnsupported);
  data.model = "gpt2";
  data.merges = {"a a"};
  data.pre = "no-such-pre";
  EXPECT_EQ(Tokenizer::FromVocab(data).status().code(), StatusCode::kUnsupported);
  data.model = "llama";
  data.tokens.clear();
  EXPECT_FALSE(Tokenizer::FromVocab(data).ok());
  data.tokens = {"<unk>", "<s>", "</s>"};
  data.scores = {0.0f};  // fewer scores than tokens
  EXPECT_EQ(Tokenizer::FromVocab(data).status().code(), StatusCode::kCorrupt);
}

TEST(FromVocab, OutOfRangeSpecialIdsKeepDefaults) {
  VocabData data;
  data.model = "llama";
  data.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a"};
  data.types = {2, 3, 3, 1};
  data.pad_id = 4294967295u;  // stories260K's "none"
  data.bos_id = 7;            // out of range: the default (1) stays
  auto tok = Tokenizer::FromVocab(data);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  EXPECT_EQ((*tok)->bos(), 1);
  EXPECT_EQ((*tok)->Encode("a", true, false), (Ids{1, 3}));
}

}  // namespace
}  // namespace cohort::tokenizer
