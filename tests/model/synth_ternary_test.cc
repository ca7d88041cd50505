// `cohort synth --type tq1_0|tq2_0` quantizes as llama-quantize does for the ternary types:
// without --pure, an untied token_embd at Q4_K and the LM head at Q6_K, a matrix whose rows are
// not whole 256-value blocks (gpt-oss-test's 128-wide expert down projection) at Q4_0, the
// rest ternary; with --pure every matrix whose rows allow it ternary. The file loads and its
// forward pass gives finite logits.
#include <sys/types.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "golden_util.h"
#include "model/synth.h"

namespace cohort::model {
namespace {

struct Case {
  const char* type;
  DType ternary;
  bool pure;
};

class SynthTernaryTest : public ::testing::TestWithParam<Case> {};

TEST_P(SynthTernaryTest, TypesFollowLlamaQuantize) {
  const Case& c = GetParam();
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("cohort-synth-" + std::string(c.type) + (c.pure ? "-pure-" : "-") +
                                     std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  SynthOptions o;
  o.shape = "gpt-oss-test";
  o.type = c.type;
  o.pure = c.pure;
  o.vocab_file = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";
  o.output = (dir / "model.gguf").string();
  ThreadPool pool(2);
  const Status st = Synthesize(o, &pool);
  ASSERT_TRUE(st.ok()) << st.ToString();
  {
    auto file = gguf::File::Open(o.output);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    int ternary = 0;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
      const bool matrix = t.ne.size() >= 2 && t.name.ends_with(".weight");
      if (!matrix || t.name.find("ffn_gate_inp") != std::string::npos) continue;  // the router stays F32
      SCOPED_TRACE(t.name);
      if (t.ne[0] % 256 != 0) {
        EXPECT_EQ(t.type, DType::kQ4_0);  // llama-quantize's fallback for the ternary types
      } else if (!c.pure && t.name == "token_embd.weight") {
        EXPECT_EQ(t.type, DType::kQ4_K);
      } else if (!c.pure && t.name == "output.weight") {
        EXPECT_EQ(t.type, DType::kQ6_K);
      } else {
        EXPECT_EQ(t.type, c.ternary);
        ++ternary;
      }
    }
    EXPECT_GT(ternary, 4);
    auto model = Model::Load(**file);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    KvCacheOptions ko;
    ko.n_ctx = 32;
    auto cache = (*model)->NewKvCache(ko);
    ASSERT_TRUE(cache.ok()) << cache.status().ToString();
    Context ctx{&pool, nullptr};
    // The prompt as one batch (the vec-dot per row and token) and a decode step.
    const std::vector<float> logits = testing::RunChunks(**model, ctx, **cache, {1, 5, 9, 13, 17, 21}, 5, 1);
    ASSERT_EQ(logits.size(), 6u * static_cast<size_t>((*model)->config().n_vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  }
  std::filesystem::remove_all(dir);
}

const Case kCases[] = {{"tq1_0", DType::kTQ1_0, false},
                       {"tq2_0", DType::kTQ2_0, false},
                       {"tq1_0", DType::kTQ1_0, true},
                       {"tq2_0", DType::kTQ2_0, true}};

INSTANTIATE_TEST_SUITE_P(Types, SynthTernaryTest, ::testing::ValuesIn(kCases), [](const auto& info) {
  return std::string(info.param.type) + (info.param.pure ? "_pure" : "");
});

}  // namespace
}  // namespace cohort::model
