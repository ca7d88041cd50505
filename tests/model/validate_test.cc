// A GGUF whose tensors or metadata do not match the architecture must fail Model::Load with a
// Status naming the problem (never a crash). Files are rewritten from a real fixture with the
// gguf Writer, changing one thing at a time.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/model.h"

namespace cohort::model {
namespace {

std::string Fixture(const char* name) {
  return std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf";
}

// The fixture rewritten: `tensor(name, ne, data)` may edit each tensor and returns whether to
// keep it; `extra_kv` may override metadata.
std::vector<uint8_t> RewriteFixture(
    const char* name,
    const std::function<bool(const std::string&, std::vector<int64_t>&, std::vector<uint8_t>&)>& tensor,
    const std::function<void(gguf::Writer&)>& extra_kv = nullptr) {
  auto file = gguf::File::Open(Fixture(name));
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  gguf::Writer w;
  for (const gguf::KeyValue& kv : (*file)->metadata()) {
    if (kv.key == "general.alignment") continue;
    w.Set(kv.key, kv.value);
  }
  if (extra_kv) extra_kv(w);
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    std::vector<int64_t> ne = t.ne;
    const std::span<const uint8_t> bytes = (*file)->TensorData(t);
    std::vector<uint8_t> data(bytes.begin(), bytes.end());
    if (!tensor(t.name, ne, data)) continue;
    w.AddTensor(t.name, t.type, ne, std::move(data));
  }
  return w.Serialize();
}

Status LoadBytes(const std::vector<uint8_t>& bytes) {
  auto file = gguf::File::Parse(bytes);
  if (!file.ok()) return file.status();
  auto model = Model::Load(**file);
  return model.ok() ? Status::Ok() : model.status();
}

TEST(ValidateTest, UnchangedRewriteLoads) {
  const auto keep = [](const std::string&, std::vector<int64_t>&, std::vector<uint8_t>&) { return true; };
  for (const char* name : {"tiny-llama-f32", "tiny-deepseek2-f32", "tiny-qwen3moe-f32"}) {
    const Status s = LoadBytes(RewriteFixture(name, keep));
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
  }
}

TEST(ValidateTest, WrongTensorShapeFailsWithItsName) {
  // blk.1.attn_k.weight [256,128] -> [256,64]: still a valid GGUF, wrong for the config.
  const std::vector<uint8_t> bytes = RewriteFixture(
      "tiny-llama-f32", [](const std::string& n, std::vector<int64_t>& ne, std::vector<uint8_t>& d) {
        if (n == "blk.1.attn_k.weight") {
          ne = {256, 64};
          d.resize(256 * 64 * 4);
        }
        return true;
      });
  const Status s = LoadBytes(bytes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_NE(s.message().find("blk.1.attn_k.weight"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("[256, 64]"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("[256, 128]"), std::string::npos) << s.ToString();
}

TEST(ValidateTest, WrongExpertTensorShapeFails) {
  const std::vector<uint8_t> bytes = RewriteFixture(
      "tiny-deepseek2-f32", [](const std::string& n, std::vector<int64_t>& ne, std::vector<uint8_t>& d) {
        if (n == "blk.2.attn_k_b.weight") {
          ne = {32, 64, 2};
          d.resize(32 * 64 * 2 * 4);
        }
        return true;
      });
  const Status s = LoadBytes(bytes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("blk.2.attn_k_b.weight"), std::string::npos) << s.ToString();
}

TEST(ValidateTest, MissingTensorFails) {
  const std::vector<uint8_t> bytes = RewriteFixture(
      "tiny-qwen3moe-f32", [](const std::string& n, std::vector<int64_t>&, std::vector<uint8_t>&) {
        return n != "blk.0.ffn_down_exps.weight";
      });
  const Status s = LoadBytes(bytes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("blk.0.ffn_down_exps.weight"), std::string::npos) << s.ToString();
}

TEST(ValidateTest, InconsistentMetadataFails) {
  const auto keep = [](const std::string&, std::vector<int64_t>&, std::vector<uint8_t>&) { return true; };
  // 3 KV heads do not divide 4 query heads.
  Status s = LoadBytes(RewriteFixture("tiny-llama-f32", keep, [](gguf::Writer& w) {
    w.SetUint32("llama.attention.head_count_kv", 3);
  }));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("n_head_kv"), std::string::npos) << s.ToString();
  // An unsupported architecture.
  s = LoadBytes(RewriteFixture("tiny-llama-f32", keep, [](gguf::Writer& w) {
    w.SetString("general.architecture", "mamba");
  }));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  // More experts used than exist.
  s = LoadBytes(RewriteFixture("tiny-qwen3moe-f32", keep, [](gguf::Writer& w) {
    w.SetUint32("qwen3moe.expert_used_count", 9);
  }));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("expert_used_count"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace cohort::model
