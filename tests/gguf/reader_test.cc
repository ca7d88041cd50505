// Reads the real fixtures (tiny models, llama.cpp vocab files) and checks what the reader
// reports against tensor_types.txt, written independently by llama.cpp's gguf-py.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace cohort::gguf {
namespace {

namespace fs = std::filesystem;

struct ExpectedTensor {
  std::string type;  // upper case, as tensor_types.txt prints it ("Q4_K")
  std::vector<int64_t> ne;
};

// tensor_types.txt: "models/x.gguf: ..." then "    name  TYPE  [a, b]" lines.
std::map<std::string, std::map<std::string, ExpectedTensor>> LoadTensorTypes() {
  std::ifstream in(std::string(COHORT_TEST_DATA) + "/fixtures/models/tensor_types.txt");
  std::map<std::string, std::map<std::string, ExpectedTensor>> out;
  std::string line;
  std::string model;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] != ' ') {
      model = fs::path(line.substr(0, line.find(':'))).filename().string();
      continue;
    }
    std::istringstream fields(line);
    std::string name;
    ExpectedTensor t;
    fields >> name >> t.type;
    std::string rest;
    std::getline(fields, rest);
    for (char& c : rest) {
      if (c == '[' || c == ']' || c == ',') c = ' ';
    }
    std::istringstream dims(rest);
    int64_t d = 0;
    while (dims >> d) t.ne.push_back(d);
    out[model][name] = t;
  }
  return out;
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

TEST(GgufReader, FixturesMatchTensorTypes) {
  const auto expected = LoadTensorTypes();
  ASSERT_EQ(expected.size(), 13u);
  for (const auto& [model, tensors] : expected) {
    SCOPED_TRACE(model);
    auto file = File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/" + model);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const File& f = **file;
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.data_offset() % 32, 0u);
    EXPECT_FALSE(f.architecture().empty());
    EXPECT_EQ(model.find("tiny-" + f.architecture() + "-"), 0u) << f.architecture();
    ASSERT_EQ(f.tensors().size(), tensors.size());
    uint64_t bytes_total = 0;
    for (const auto& [name, want] : tensors) {
      const TensorInfo* info = f.FindTensor(name);
      ASSERT_NE(info, nullptr) << name;
      EXPECT_EQ(Upper(DTypeName(info->type)), want.type) << name;
      EXPECT_EQ(info->ne, want.ne) << name;
      EXPECT_EQ(f.TensorData(*info).size(), info->n_bytes);
      bytes_total += info->n_bytes;
    }
    // The data section holds the tensors and at most alignment padding after each.
    EXPECT_LE(bytes_total, f.file_size() - f.data_offset());
    EXPECT_GT(bytes_total + 32 * f.tensors().size(), f.file_size() - f.data_offset());
  }
}

TEST(GgufReader, TypedGettersOnFixture) {
  auto file = File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-q4_0.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const File& f = **file;
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.GetString("general.architecture").value(), "llama");
  auto file_type = f.GetUint("general.file_type");
  ASSERT_TRUE(file_type.ok()) << file_type.status().ToString();
  EXPECT_EQ(*file_type, 2u);
  EXPECT_EQ(f.GetInt("general.file_type").value(), 2);
  EXPECT_EQ(f.GetFloat("general.file_type").value(), 2.0);
  EXPECT_EQ(f.GetInt("llama.block_count").value(), static_cast<int64_t>(2));
  EXPECT_TRUE(f.GetFloat("llama.attention.layer_norm_rms_epsilon").ok());

  // Absent keys: kNotFound, or the fallback.
  EXPECT_EQ(f.GetInt("no.such.key").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(f.GetInt("no.such.key", 7).value(), 7);
  EXPECT_EQ(f.GetString("no.such.key", "x").value(), "x");
  EXPECT_EQ(f.GetBool("no.such.key", true).value(), true);
  EXPECT_EQ(f.GetFloat("no.such.key", 0.5).value(), 0.5);
  EXPECT_EQ(f.Find("no.such.key"), nullptr);
  EXPECT_EQ(f.FindTensor("no.such.tensor"), nullptr);

  // Present keys of the wrong type: an error naming the key, even with a fallback.
  auto wrong = f.GetInt("general.architecture", 3);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(wrong.status().message().find("general.architecture"), std::string::npos);
  EXPECT_FALSE(f.GetString("general.file_type").ok());
  EXPECT_FALSE(f.GetBool("general.architecture").ok());

  auto tokens = f.GetArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
  EXPECT_EQ((*tokens)->element_type, ValueType::kString);
  EXPECT_GT((*tokens)->items.size(), 100u);
  EXPECT_FALSE(f.GetArray("general.architecture").ok());

  // Tensor bytes: sub-ranges are views into the same mapping.
  const TensorInfo* embd = f.FindTensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, DType::kQ4_0);
  EXPECT_EQ(embd->n_bytes, static_cast<uint64_t>(RowBytes(DType::kQ4_0, embd->ne[0]) * embd->n_rows()));
  auto all = f.TensorData(*embd);
  auto part = f.TensorBytes(*embd, 18, 36);
  EXPECT_EQ(part.data(), all.data() + 18);
  EXPECT_EQ(part.size(), 18u);
}

TEST(GgufReader, VocabFilesParse) {
  const fs::path dir = fs::path(COHORT_EXTERNAL_DATA) / "vocab";
  ASSERT_TRUE(fs::is_directory(dir)) << dir << " missing: run scripts/fetch-test-data.sh";
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".gguf") continue;
    SCOPED_TRACE(entry.path().string());
    auto file = File::Open(entry.path().string());
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto model = (*file)->GetString("tokenizer.ggml.model");
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    auto tokens = (*file)->GetArray("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.status().ToString();
    EXPECT_GT((*tokens)->items.size(), 1000u);
    ++parsed;
  }
  EXPECT_GE(parsed, 15);
}

TEST(GgufReader, Stories260K) {
  auto file = File::Open(std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->architecture(), "llama");
  EXPECT_NE((*file)->FindTensor("token_embd.weight"), nullptr);
}

TEST(GgufReader, OpenErrors) {
  auto missing = File::Open("/nonexistent/x.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = File::Open(COHORT_TEST_DATA);
  ASSERT_FALSE(dir.ok());
  auto text = File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/README.md");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("bad magic"), std::string::npos);
  EXPECT_NE(text.status().message().find("README.md"), std::string::npos);
}

}  // namespace
}  // namespace cohort::gguf
