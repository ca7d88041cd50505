// Hostile input: every file of the committed malformed corpus must fail with a specific message,
// and truncations of valid files at many cut points must fail cleanly (never crash or hang).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "malformed_cases.h"

namespace cohort::gguf {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpusDir = fs::path(COHORT_TEST_DATA) / "gguf-malformed";

std::vector<uint8_t> ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Parses a copy of exactly `n` bytes, so a sanitizer sees any read past the end.
Status ParseExact(const std::vector<uint8_t>& bytes, size_t n, const ReadLimits& limits = {}) {
  std::vector<uint8_t> copy(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
  auto parsed = File::Parse(copy, limits);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

TEST(GgufMalformed, SmallValidFileParses) {
  const std::vector<uint8_t> bytes = testing::SmallValidFile();
  auto file = File::Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->tensors().size(), 3u);
  EXPECT_EQ((*file)->metadata().size(), 3u);
  EXPECT_EQ((*file)->data_offset(), 320u);
  EXPECT_EQ((*file)->FindTensor("b.weight")->n_bytes, 36u);
}

TEST(GgufMalformed, CommittedCorpusFailsWithSpecificMessages) {
  const std::vector<testing::MalformedCase> cases = testing::MalformedCases();
  EXPECT_GE(cases.size(), 25u);
  std::set<std::string> names;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name + ".gguf").second) << "duplicate case name";
    const fs::path path = kCorpusDir / (c.name + ".gguf");
    ASSERT_TRUE(fs::exists(path)) << path << ": regenerate with make_gguf_malformed";
    EXPECT_EQ(ReadAll(path), c.bytes) << path << " differs from its generator";

    auto opened = File::Open(path.string());
    ASSERT_FALSE(opened.ok()) << "malformed file parsed";
    EXPECT_NE(opened.status().message().find(c.expected_message), std::string::npos)
        << "got: " << opened.status().ToString() << "\nwanted: " << c.expected_message;
    EXPECT_NE(opened.status().message().find(c.name), std::string::npos)
        << "Open's error should name the file";

    const Status parsed = ParseExact(c.bytes, c.bytes.size());
    EXPECT_FALSE(parsed.ok());
    EXPECT_NE(parsed.message().find(c.expected_message), std::string::npos) << parsed.ToString();
  }
  // Every committed file is covered by a case (a stray file would go untested).
  for (const auto& entry : fs::directory_iterator(kCorpusDir)) {
    EXPECT_EQ(names.count(entry.path().filename().string()), 1u) << entry.path();
  }
}

TEST(GgufMalformed, StatusCodes) {
  const std::set<std::string> unsupported = {"version_1", "version_4", "big_endian",
                                             "unknown_ggml_type_removed_q4_2",
                                             "unknown_ggml_type_1000"};
  const std::set<std::string> out_of_range = {"huge_tensor_count", "huge_kv_count",
                                              "huge_string_length", "huge_key_length",
                                              "array_count_overflow", "nested_array_depth_bomb",
                                              // Lies that make a later length absurd:
                                              "kv_count_off_by_one", "array_string_count_lies"};
  for (const auto& c : testing::MalformedCases()) {
    const Status s = ParseExact(c.bytes, c.bytes.size());
    StatusCode want = StatusCode::kCorrupt;
    if (unsupported.count(c.name)) want = StatusCode::kUnsupported;
    if (out_of_range.count(c.name)) want = StatusCode::kOutOfRange;
    EXPECT_EQ(s.code(), want) << c.name << ": " << s.ToString();
  }
}

// Every cut of a file before the end of its last tensor's data must fail; cuts inside the
// final padding may succeed (the data is whole).
void CheckTruncations(const std::vector<uint8_t>& bytes, size_t step_after) {
  auto full = File::Parse(bytes);
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  uint64_t data_end = (*full)->data_offset();
  for (const TensorInfo& t : (*full)->tensors()) {
    data_end = std::max(data_end, (*full)->data_offset() + t.offset + t.n_bytes);
  }
  size_t checked = 0;
  for (size_t n = 0; n < bytes.size(); n += (n < step_after ? 1 : 997)) {
    const Status s = ParseExact(bytes, n);
    if (n < data_end) {
      ASSERT_FALSE(s.ok()) << "cut at " << n << " of " << bytes.size() << " parsed";
      EXPECT_FALSE(s.message().empty());
    }
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

TEST(GgufMalformed, TruncatedSmallFileAtEveryByte) {
  CheckTruncations(testing::SmallValidFile(), SIZE_MAX);
}

TEST(GgufMalformed, TruncatedFixtureAtManyCuts) {
  const auto bytes =
      ReadAll(fs::path(COHORT_TEST_DATA) / "fixtures/models/tiny-qwen3-q4_k_m.gguf");
  ASSERT_GT(bytes.size(), 100000u);
  // Every byte of the first 2 KiB (header and first keys), then every 997th.
  CheckTruncations(bytes, 2048);
}

TEST(GgufMalformed, ReadLimitsAreHonoured) {
  const auto bytes =
      ReadAll(fs::path(COHORT_TEST_DATA) / "fixtures/models/tiny-llama-q8_0.gguf");
  ASSERT_TRUE(ParseExact(bytes, bytes.size()).ok());
  auto expect_limit = [&](ReadLimits limits, const std::string& message) {
    const Status s = ParseExact(bytes, bytes.size(), limits);
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
    EXPECT_NE(s.message().find(message), std::string::npos) << s.ToString();
  };
  ReadLimits limits;
  limits.max_tensors = 3;
  expect_limit(limits, "tensors, more than the limit of 3");
  limits = {};
  limits.max_kv = 2;
  expect_limit(limits, "metadata entries, more than the limit of 2");
  limits = {};
  limits.max_string_bytes = 4;
  expect_limit(limits, "exceeds the limit of 4 bytes");
  limits = {};
  limits.max_array_elements = 100;
  expect_limit(limits, "tokenizer.ggml.tokens");
  limits = {};
  limits.max_total_array_elements = 1000;
  expect_limit(limits, "elements in total");
}

}  // namespace
}  // namespace cohort::gguf
