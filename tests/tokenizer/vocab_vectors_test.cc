// llama.cpp's own tokenizer vectors (tests/test-tokenizer-0: ggml-vocab-*.gguf with .inp/.out),
// fetched by scripts/fetch-test-data.sh. Each input is tokenized with add_special = false and
// parse_special = false, and must give exactly the expected ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::tokenizer {
namespace {

const std::string kVocabDir = std::string(COHORT_EXTERNAL_DATA) + "/vocab";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Parses the .inp/.out pair the way test-tokenizer-0.cpp does: inputs are separated by
// "\n__ggml_vocab_test__\n", one output line per input; a repeated input keeps its last line.
std::map<std::string, std::vector<int32_t>> ReadVectors(const std::string& base) {
  const std::string raw = ReadAll(base + ".inp");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<std::string> outputs;
  std::ifstream out(base + ".out");
  for (std::string line; std::getline(out, line);) outputs.push_back(line);
  EXPECT_EQ(inputs.size(), outputs.size()) << base;
  std::map<std::string, std::vector<int32_t>> tests;
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    std::vector<int32_t> ids;
    std::istringstream fields(Strip(outputs[i]));
    for (int32_t id; fields >> id;) ids.push_back(id);
    tests[inputs[i]] = ids;
  }
  return tests;
}

std::string Join(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

class VocabVectors : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchesLlamaCpp) {
  ASSERT_TRUE(std::filesystem::is_directory(kVocabDir))
      << kVocabDir << " is missing: run scripts/fetch-test-data.sh to fetch llama.cpp's "
      << "tokenizer vectors";
  const std::string base = kVocabDir + "/ggml-vocab-" + GetParam() + ".gguf";
  ASSERT_TRUE(std::filesystem::exists(base + ".inp"))
      << base << ".inp is missing: run scripts/fetch-test-data.sh";
  auto file = gguf::File::Open(base);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto tok = Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();

  const auto tests = ReadVectors(base);
  ASSERT_GE(tests.size(), 30u);
  size_t passed = 0;
  for (const auto& [input, expected] : tests) {
    const std::vector<int32_t> got = (*tok)->Encode(input, false, false);
    if (got == expected) {
      ++passed;
    } else {
      ADD_FAILURE() << "input '" << input << "'\n  expected " << Join(expected) << "\n  got      "
                    << Join(got);
    }
  }
  EXPECT_EQ(passed, tests.size());
  std::cout << "[ vectors  ] " << GetParam() << ": " << passed << "/" << tests.size()
            << " passed\n";
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, VocabVectors,
                         ::testing::Values("llama-spm", "llama-bpe", "qwen2", "deepseek-llm",
                                           "gpt-2", "deepseek-coder", "falcon", "starcoder",
                                           "phi-3", "refact", "mpt", "command-r", "qwen35",
                                           "gemma-4"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace cohort::tokenizer
