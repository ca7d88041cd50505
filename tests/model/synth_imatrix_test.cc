// `cohort synth --imatrix`: the IQ4_XS matrices an importance matrix measured are quantized
// against it (the bytes QuantizeRowWeighted gives the F32 model's values, which differ from the
// unweighted quantizer's, and whose importance-weighted error is smaller); the others as
// without; an importance matrix of another shape is refused, naming the tensor.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "kernels/quant.h"
#include "model/synth.h"

namespace cohort::model {
namespace {

std::vector<float> AsFloats(std::span<const uint8_t> bytes) {
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

std::vector<uint8_t> AsBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(float));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// sum_j importance[j % n] * (x_j - dequantized_j)^2 over a tensor's rows.
double WeightedError(const std::vector<float>& x, DType type, std::span<const uint8_t> q, int64_t n,
                     const std::vector<float>& importance) {
  std::vector<float> back(x.size());
  for (size_t r = 0; r < x.size() / static_cast<size_t>(n); ++r) {
    kernels::DequantizeRow(type, q.data() + r * RowBytes(type, n), back.data() + r * n, n);
  }
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += importance[i % n] * (x[i] - back[i]) * (x[i] - back[i]);
  return e;
}

class SynthImatrixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("cohort-synth-imatrix-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Status Synth(const std::string& type, const std::string& imatrix, const std::string& out) {
    SynthOptions o;
    o.shape = "qwen3-0.6b";
    o.type = type;
    o.pure = true;
    o.n_layer_override = 1;
    o.vocab_file = std::string(COHORT_TEST_DATA) + "/fixtures/models/stories260K.gguf";
    o.imatrix = imatrix;
    o.output = (dir_ / out).string();
    return Synthesize(o, &pool_);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
  ThreadPool pool_{2};
};

TEST_F(SynthImatrixTest, Iq4XsMatricesAreQuantizedAgainstTheMatrix) {
  ASSERT_TRUE(Synth("f32", "", "f32.gguf").ok());
  auto f32 = gguf::File::Open(Path("f32.gguf"));
  ASSERT_TRUE(f32.ok());
  // An importance matrix as llama-imatrix writes it, for the layer's matrices (not the embedding
  // nor the head, which it does not measure): every 7th column 100 times as important, sums of
  // squares over 10 tokens.
  gguf::Writer w;
  std::vector<std::string> measured;
  for (const gguf::TensorInfo& t : (*f32)->tensors()) {
    if (t.ne.size() != 2 || t.name.rfind("blk.", 0) != 0) continue;
    std::vector<float> sums(static_cast<size_t>(t.ne[0]));
    for (size_t j = 0; j < sums.size(); ++j) sums[j] = 10.0f * (j % 7 == 0 ? 100.0f : 1.0f);
    w.AddTensor(t.name + ".in_sum2", DType::kF32, {t.ne[0], 1}, AsBytes(sums));
    w.AddTensor(t.name + ".counts", DType::kF32, {1, 1}, AsBytes({10.0f}));
    measured.push_back(t.name);
  }
  ASSERT_EQ(measured.size(), 7u);
  ASSERT_TRUE(w.WriteFile(Path("imatrix.gguf")).ok());

  ASSERT_TRUE(Synth("iq4_xs", Path("imatrix.gguf"), "weighted.gguf").ok());
  ASSERT_TRUE(Synth("iq4_xs", "", "plain.gguf").ok());
  auto weighted = gguf::File::Open(Path("weighted.gguf"));
  auto plain = gguf::File::Open(Path("plain.gguf"));
  ASSERT_TRUE(weighted.ok() && plain.ok());
  for (const gguf::TensorInfo& t : (*weighted)->tensors()) {
    if (t.ne.size() != 2) continue;
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.type, DType::kIQ4_XS);
    const std::vector<float> x = AsFloats((*f32)->TensorData(*(*f32)->FindTensor(t.name)));
    const auto got = (*weighted)->TensorData(t);
    const auto unweighted = (*plain)->TensorData(*(*plain)->FindTensor(t.name));
    const int64_t n = t.ne[0];
    const bool is_measured = std::find(measured.begin(), measured.end(), t.name) != measured.end();
    if (!is_measured) {
      EXPECT_EQ(0, std::memcmp(got.data(), unweighted.data(), got.size()));
      continue;
    }
    std::vector<float> importance(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) importance[j] = j % 7 == 0 ? 100.0f : 1.0f;
    std::vector<uint8_t> want(got.size());
    for (int64_t r = 0; r < t.n_rows(); ++r) {
      kernels::QuantizeRowWeighted(t.type, x.data() + r * n, want.data() + r * RowBytes(t.type, n), n,
                                   importance.data());
    }
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size()));
    EXPECT_NE(0, std::memcmp(got.data(), unweighted.data(), got.size()));
    EXPECT_LT(WeightedError(x, t.type, got, n, importance), WeightedError(x, t.type, unweighted, n, importance));
  }
}

TEST_F(SynthImatrixTest, AMatrixOfAnotherShapeIsRefused) {
  gguf::Writer w;
  w.AddTensor("blk.0.attn_q.weight.in_sum2", DType::kF32, {512, 1}, AsBytes(std::vector<float>(512, 1.0f)));
  w.AddTensor("blk.0.attn_q.weight.counts", DType::kF32, {1, 1}, AsBytes({1.0f}));
  ASSERT_TRUE(w.WriteFile(Path("other.gguf")).ok());
  const Status st = Synth("iq4_xs", Path("other.gguf"), "refused.gguf");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("blk.0.attn_q.weight has 512 importance values"), std::string::npos) << st.ToString();
  const Status missing = Synth("iq4_xs", Path("no-such.gguf"), "refused.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("not an importance matrix GGUF"), std::string::npos) << missing.ToString();
}

}  // namespace
}  // namespace cohort::model
