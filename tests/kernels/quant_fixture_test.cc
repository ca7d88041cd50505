// Real tensors from the llama.cpp fixtures: one F32 tensor and its Q8_0, Q6_K, Q4_K and Q4_0
// versions (made by llama-quantize) must dequantize to the same values within each type's
// error, and our Q4_0 quantizer must reproduce llama-quantize's bytes exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gguf/gguf.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf";
}

struct LoadedTensor {
  std::unique_ptr<gguf::File> file;
  const gguf::TensorInfo* info = nullptr;
  std::vector<float> values;  // dequantized
};

LoadedTensor Load(const std::string& model, const std::string& tensor, DType expected_type) {
  LoadedTensor t;
  auto file = gguf::File::Open(ModelPath(model));
  EXPECT_TRUE(file.ok()) << model;
  if (!file.ok()) return t;
  t.file = std::move(file).value();
  t.info = t.file->FindTensor(tensor);
  EXPECT_NE(t.info, nullptr) << tensor;
  if (t.info == nullptr) return t;
  EXPECT_EQ(t.info->type, expected_type) << model << " " << tensor;
  const auto bytes = t.file->TensorData(*t.info);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()), RowBytes(t.info->type, t.info->n_elements()));
  t.values.resize(static_cast<size_t>(t.info->n_elements()));
  DequantizeRow(t.info->type, bytes.data(), t.values.data(), t.info->n_elements());
  return t;
}

double RelativeRms(const std::vector<float>& got, const std::vector<float>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    err += (got[i] - ref[i]) * static_cast<double>(got[i] - ref[i]);
    norm += ref[i] * static_cast<double>(ref[i]);
  }
  return std::sqrt(err / norm);
}

struct Variant {
  const char* model;
  const char* tensor;
  DType type;
  double rel_rms_max;
};

TEST(QuantFixture, QuantizedTensorsDequantizeToTheF32Values) {
  const Variant variants[] = {
      {"tiny-llama-q8_0", "blk.0.ffn_gate.weight", DType::kQ8_0, 0.01},
      {"tiny-llama-q6_k", "blk.0.ffn_gate.weight", DType::kQ6_K, 0.03},
      {"tiny-llama-q4_k_m", "blk.0.ffn_gate.weight", DType::kQ4_K, 0.12},
      {"tiny-llama-q4_k_m", "blk.1.ffn_down.weight", DType::kQ6_K, 0.03},
      {"tiny-llama-q4_0", "blk.0.ffn_gate.weight", DType::kQ4_0, 0.15},
      {"tiny-llama-q4_0", "token_embd.weight", DType::kQ4_0, 0.15},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(std::string(v.model) + " " + v.tensor);
    const LoadedTensor f32 = Load("tiny-llama-f32", v.tensor, DType::kF32);
    const LoadedTensor q = Load(v.model, v.tensor, v.type);
    ASSERT_FALSE(f32.values.empty());
    ASSERT_EQ(q.values.size(), f32.values.size());
    const double rel = RelativeRms(q.values, f32.values);
    EXPECT_LE(rel, v.rel_rms_max);
    EXPECT_GT(rel, 1e-4);  // they are quantized, not copies
  }
}

TEST(QuantFixture, Q4_0QuantizerReproducesLlamaQuantizeBytes) {
  const LoadedTensor f32 = Load("tiny-llama-f32", "blk.0.attn_q.weight", DType::kF32);
  auto file = gguf::File::Open(ModelPath("tiny-llama-q4_0"));
  ASSERT_TRUE(file.ok());
  const gguf::TensorInfo* info = (*file)->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(info->type, DType::kQ4_0);
  const auto want = (*file)->TensorData(*info);
  std::vector<uint8_t> got(want.size());
  QuantizeRow(DType::kQ4_0, f32.values.data(), got.data(), static_cast<int64_t>(f32.values.size()));
  size_t differing = 0;
  for (size_t i = 0; i < got.size(); ++i) differing += got[i] != want[i];
  EXPECT_EQ(differing, 0u) << "of " << got.size() << " bytes";
}

TEST(QuantFixture, Q8_0QuantizerMatchesLlamaQuantizeScalesAndWithinOneStep) {
  // llama-quantize uses ggml's reference Q8_0 quantizer (multiplier 1/d, ties away from
  // zero); QuantizeRow(Q8_0) is the activation quantizer (127/amax, ties to even). Scales
  // must be identical and quants may differ by at most one step.
  const LoadedTensor f32 = Load("tiny-llama-f32", "blk.0.attn_k.weight", DType::kF32);
  auto file = gguf::File::Open(ModelPath("tiny-llama-q8_0"));
  ASSERT_TRUE(file.ok());
  const gguf::TensorInfo* info = (*file)->FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(info, nullptr);
  const auto want = (*file)->TensorData(*info);
  std::vector<uint8_t> got(want.size());
  QuantizeRow(DType::kQ8_0, f32.values.data(), got.data(), static_cast<int64_t>(f32.values.size()));
  int64_t off_by_one = 0;
  for (size_t b = 0; b < got.size(); b += 34) {
    ASSERT_EQ(got[b], want[b]);
    ASSERT_EQ(got[b + 1], want[b + 1]);
    for (int j = 0; j < 32; ++j) {
      const int diff = static_cast<int8_t>(got[b + 2 + j]) - static_cast<int8_t>(want[b + 2 + j]);
      ASSERT_LE(std::abs(diff), 1);
      off_by_one += diff != 0;
    }
  }
  EXPECT_LT(off_by_one, static_cast<int64_t>(got.size() / 34 * 32 / 100));
}

}  // namespace
}  // namespace cohort::kernels
