// DescribeModelFile: the header, one line per tensor, the per-type totals and the KV-cache
// estimate for a runnable model; the reason in place of the config for one that is not.
#include "model/inspect.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>
#include <string_view>

#include "gguf/writer.h"
#include "model/config.h"

namespace cohort::model {
namespace {

std::string StoriesPath() { return std::string(COHORT_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }

int CountLinesStartingWith(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}

TEST(DescribeModelFile, ListsEveryTensorAndTheKvCacheAtTheAskedContext) {
  auto file = gguf::File::Open(StoriesPath());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const std::string text = DescribeModelFile(**file, 100);
  EXPECT_EQ(text.rfind("file          " + StoriesPath() + "\n", 0), 0u) << text;
  // Each tensor's own line carries its name and its shape in brackets.
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    EXPECT_NE(text.find("  " + t.name + " "), std::string::npos) << t.name;
  }
  // Every indented line is a type total, a tensor, or one of the two memory lines.
  std::set<std::string_view> types;
  for (const gguf::TensorInfo& t : (*file)->tensors()) types.insert(DTypeName(t.type));
  EXPECT_EQ(CountLinesStartingWith(text, "  "), static_cast<int>(types.size() + (*file)->tensors().size() + 2))
      << text;
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok());
  EXPECT_NE(text.find(config->ToString()), std::string::npos);
  // Key and value of every KV head, per layer and position, at 4 and 2 bytes.
  const double elements = static_cast<double>(config->n_head_kv) * (config->head_dim_k + config->head_dim_v) *
                          config->n_layer * 100;
  char kv_line[128];
  std::snprintf(kv_line, sizeof(kv_line), "  KV cache      %.2f MiB (f32) / %.2f MiB (f16) at context 100\n",
                elements * 4 / 1048576.0, elements * 2 / 1048576.0);
  EXPECT_NE(text.find(kv_line), std::string::npos) << text;
}

TEST(DescribeModelFile, DefaultsToTheTrainingContext) {
  auto file = gguf::File::Open(StoriesPath());
  ASSERT_TRUE(file.ok());
  auto config = ModelConfig::FromGguf(**file);
  ASSERT_TRUE(config.ok());
  EXPECT_NE(DescribeModelFile(**file, 0).find("at context " + std::to_string(config->n_ctx_train) + "\n"),
            std::string::npos);
}

TEST(DescribeModelFile, SaysWhyAnArchitectureCannotRun) {
  gguf::Writer w;
  w.SetString("general.architecture", "no-such-arch");
  w.SetString("general.name", "odd one");
  w.AddTensor("blob.weight", DType::kF32, {4, 2}, std::vector<uint8_t>(32));
  const std::vector<uint8_t> bytes = w.Serialize();
  auto file = gguf::File::Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const std::string text = DescribeModelFile(**file, 64);
  EXPECT_NE(text.find("name          odd one\n"), std::string::npos) << text;
  EXPECT_NE(text.find("architecture  no-such-arch (not runnable: "), std::string::npos) << text;
  EXPECT_NE(text.find("  blob.weight                      f32    [4 x 2] 0.00 MiB\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  f32        1 tensors"), std::string::npos) << text;
  EXPECT_EQ(text.find("KV cache"), std::string::npos) << text;
}

}  // namespace
}  // namespace cohort::model
