// `cohort synth --type iq2_xs|iq2_s` on a one-layer Qwen3-0.6B shape with the tiny-llama
// vocabulary: the matrices in the type (llama-quantize's 2-bit mixture puts the LM head, tied
// here to token_embd, at Q5_K; --pure keeps it in the type), general.file_type as llama.cpp
// names those files (20: MOSTLY_IQ2_XS; 29: MOSTLY_IQ2_M, whose matrices are IQ2_S), and the
// file loads, and its batched and single-token paths agree.
#include <sys/types.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "golden_util.h"
#include "model/synth.h"

namespace cohort::model::testing {
namespace {

struct Case {
  const char* type;
  DType matrices;
  uint64_t file_type;
};
constexpr Case kCases[] = {{"iq2_xs", DType::kIQ2_XS, 20}, {"iq2_s", DType::kIQ2_S, 29}};

class SynthIq2sTest : public ::testing::TestWithParam<Case> {
 protected:
  std::unique_ptr<gguf::File> Synth(bool pure) {
    SynthOptions o;
    o.shape = "qwen3-0.6b";
    o.type = GetParam().type;
    o.pure = pure;
    o.n_layer_override = 1;
    o.vocab_file = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";
    o.output = path_;
    ThreadPool pool(2);
    const Status s = Synthesize(o, &pool);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) return nullptr;
    auto file = gguf::File::Open(path_);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
    return file.ok() ? std::move(*file) : nullptr;
  }
  void TearDown() override { std::filesystem::remove(path_); }

  std::string path_ = (std::filesystem::temp_directory_path() /
                       ("cohort-synth-" + std::string(GetParam().type) + "-" + std::to_string(::getpid()) + ".gguf"))
                          .string();
};

TEST_P(SynthIq2sTest, MixtureKeepsTheHeadAtQ5_KAndPureKeepsItInTheType) {
  for (bool pure : {false, true}) {
    SCOPED_TRACE(pure ? "pure" : "mixture");
    auto file = Synth(pure);
    ASSERT_NE(file, nullptr);
    for (const char* name : {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.ffn_down.weight"}) {
      const gguf::TensorInfo* t = file->FindTensor(name);
      ASSERT_NE(t, nullptr) << name;
      EXPECT_EQ(t->type, GetParam().matrices) << name;
    }
    const gguf::TensorInfo* embd = file->FindTensor("token_embd.weight");
    ASSERT_NE(embd, nullptr);
    EXPECT_EQ(embd->type, pure ? GetParam().matrices : DType::kQ5_K);
    auto file_type = file->GetUint("general.file_type");
    ASSERT_TRUE(file_type.ok());
    EXPECT_EQ(*file_type, GetParam().file_type);
  }
}

// The prompt as one batch (10 tokens: the panel order) and token by token (the single-token
// order, with x86's sign wrap) compute the same model: close logits, the same argmax.
TEST_P(SynthIq2sTest, BatchedAndSingleTokenPathsAgree) {
  auto file = Synth(/*pure=*/true);
  ASSERT_NE(file, nullptr);
  auto model = Model::Load(*file);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  const std::vector<int32_t> prompt = {1, 10, 20, 30, 40, 50, 60, 70, 80, 90};
  std::vector<float> logits[2];
  for (int chunk : {0, 1}) {
    KvCacheOptions o;
    o.n_ctx = 64;
    o.type = DType::kF32;
    auto cache = (*model)->NewKvCache(o);
    ASSERT_TRUE(cache.ok());
    logits[chunk] = RunChunks(**model, ctx, **cache, prompt, chunk == 0 ? prompt.size() : 1, 1);
  }
  float amax = 0;
  for (float v : logits[0]) {
    ASSERT_TRUE(std::isfinite(v));
    amax = std::max(amax, std::fabs(v));
  }
  EXPECT_GT(amax, 0.1f);
  const int n_vocab = (*model)->config().n_vocab;
  const Diff d = Compare(logits[0], logits[1], n_vocab, 1e-3f);
  EXPECT_LE(d.max_abs, 0.3f);
  EXPECT_GE(d.argmax_agree, 9);
}

INSTANTIATE_TEST_SUITE_P(Iq2s, SynthIq2sTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.type); });

}  // namespace
}  // namespace cohort::model::testing
