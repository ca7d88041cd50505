// Embeddings (Scheduler::Embed) against llama.cpp's: the fixtures' golden prompts pooled by
// the mean, the first and the last position (tools/make-embedding-goldens.sh), fed whole and
// in chunks, alone and beside a generating stream; and inputs the scheduler must refuse.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace cohort::engine {
namespace {

std::string Data(const std::string& rel) { return std::string(COHORT_TEST_DATA) + "/" + rel; }

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::vector<float> v;
  float x;
  while (in.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

std::vector<int32_t> PromptIds(const std::string& name) {
  std::ifstream in(Data("fixtures/golden/" + name + ".golden.json"));
  return nlohmann::json::parse(in)["prompt_ids"].get<std::vector<int32_t>>();
}

struct Case {
  const char* model;
  model::Pooling pooling;
  float tol;  // the golden suite's row tolerances: F32 1e-4, quantized 1e-3
};

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = std::string(info.param.model) + "_" + model::PoolingName(info.param.pooling);
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

class EmbeddingGoldenTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto loaded = LoadedModel::Open(Data(std::string("fixtures/models/") + GetParam().model + ".gguf"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    model_ = std::move(*loaded);
    golden_ = ReadFloats(Data(std::string("embeddings/") + GetParam().model + "." +
                              model::PoolingName(GetParam().pooling) + ".f32"));
    ASSERT_EQ(golden_.size(), static_cast<size_t>(model_->config().n_embd));
  }

  std::unique_ptr<Scheduler> Start(int n_batch) {
    SchedulerOptions o;
    o.n_parallel = 2;
    o.n_ctx = 256;
    o.kv_type = DType::kF32;  // the goldens' cache
    o.n_batch = n_batch;
    auto s = std::make_unique<Scheduler>(*model_, ctx_, o);
    EXPECT_TRUE(s->Start().ok());
    return s;
  }

  void ExpectGolden(const std::vector<float>& got, const std::string& how) {
    ASSERT_EQ(got.size(), golden_.size()) << how;
    float max_abs = 0;
    for (size_t i = 0; i < got.size(); ++i) max_abs = std::max(max_abs, std::fabs(got[i] - golden_[i]));
    EXPECT_LE(max_abs, GetParam().tol) << how;
  }

  std::unique_ptr<LoadedModel> model_;
  Context ctx_;
  std::vector<float> golden_;
};

TEST_P(EmbeddingGoldenTest, MatchesLlamaCppWholeAndInChunks) {
  const std::vector<int32_t> ids = PromptIds(GetParam().model);
  for (int n_batch : {512, 4, 7}) {  // one batch; whole tiles; chunks that end mid-tile
    auto scheduler = Start(n_batch);
    auto got = scheduler->Embed(ids, GetParam().pooling);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectGolden(*got, "n_batch " + std::to_string(n_batch));
  }
}

TEST_P(EmbeddingGoldenTest, BesideAGeneratingStreamBothStayExact) {
  const std::vector<int32_t> ids = PromptIds(GetParam().model);
  GenerateOptions g;
  g.max_tokens = 24;
  g.sampling = GreedyParams();
  g.kv_type = DType::kF32;
  g.n_ctx = 256;
  g.ignore_eos = true;
  Generator alone(*model_, ctx_);
  auto expected = alone.Generate(ids, g);
  ASSERT_TRUE(expected.ok()) << expected.status().ToString();

  auto scheduler = Start(7);
  auto handle = scheduler->Submit({ids, g});
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  auto got = scheduler->Embed(ids, GetParam().pooling);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectGolden(*got, "beside a stream");
  RequestOutput total;
  while (!total.done) {
    RequestOutput part;
    if ((*handle)->Wait(part, std::chrono::milliseconds(100))) total.Append(std::move(part));
  }
  ASSERT_TRUE(total.status.ok()) << total.status.ToString();
  EXPECT_EQ(total.tokens, expected->tokens);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, EmbeddingGoldenTest,
    ::testing::Values(Case{"tiny-llama-f32", model::Pooling::kMean, 1e-4f},
                      Case{"tiny-llama-f32", model::Pooling::kCls, 1e-4f},
                      Case{"tiny-llama-f32", model::Pooling::kLast, 1e-4f},
                      Case{"tiny-qwen3-f32", model::Pooling::kMean, 1e-4f},
                      Case{"tiny-qwen3-f32", model::Pooling::kCls, 1e-4f},
                      Case{"tiny-qwen3-f32", model::Pooling::kLast, 1e-4f},
                      Case{"tiny-qwen3-q8_0", model::Pooling::kMean, 1e-3f},
                      Case{"tiny-qwen3-q8_0", model::Pooling::kCls, 1e-3f},
                      Case{"tiny-qwen3-q8_0", model::Pooling::kLast, 1e-3f}),
    CaseName);

TEST(EmbeddingTest, BadInputsAreRefusedAndTheSchedulerServesOn) {
  auto loaded = LoadedModel::Open(Data("fixtures/models/tiny-llama-f32.gguf"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  Context ctx;
  SchedulerOptions o;
  o.n_parallel = 1;
  o.n_ctx = 64;
  Scheduler scheduler(**loaded, ctx, o);
  ASSERT_TRUE(scheduler.Start().ok());
  const int32_t n_vocab = (*loaded)->config().n_vocab;
  EXPECT_EQ(scheduler.Embed({}, model::Pooling::kMean).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>{1, n_vocab}, model::Pooling::kMean).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>{1, -1}, model::Pooling::kMean).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>(65, 1), model::Pooling::kMean).status().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>{1, 2}, model::Pooling::kNone).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>{1, 2}, model::Pooling::kRank).status().code(),
            StatusCode::kInvalidArgument);
  // A whole context's worth works, twice (the embedding's cache is its own, freed each time).
  for (int i = 0; i < 2; ++i) {
    auto ok = scheduler.Embed(std::vector<int32_t>(64, 5), model::Pooling::kLast);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    EXPECT_EQ(ok->size(), static_cast<size_t>((*loaded)->config().n_embd));
  }
  scheduler.Stop();
  EXPECT_EQ(scheduler.Embed(std::vector<int32_t>{1, 2}, model::Pooling::kMean).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::engine
