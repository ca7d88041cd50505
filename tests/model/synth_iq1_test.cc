// `cohort synth --type iq1_s|iq1_m` (model::Synthesize) on the tiny gpt-oss shape: the file
// carries llama-quantize's mixture for the 1-bit i-quants (general.file_type 24 / 31, every
// matrix in the type, the output matrix at Q5_K) and loads, and the model runs through both of
// the type's orders: a 12-token prompt (one batch: the panel order) and single-token decode
// steps give finite logits, the same at 1 and 3 threads.
#include <sys/types.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "golden_util.h"
#include "model/synth.h"

namespace cohort::model::testing {
namespace {

class SynthIq1Test : public ::testing::TestWithParam<const char*> {};

TEST_P(SynthIq1Test, WritesTheMixtureAndRuns) {
  const std::string type = GetParam();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("cohort-synth-" + type + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  SynthOptions o;
  o.shape = "gpt-oss-test";
  o.type = type;
  o.vocab_dir = std::string(COHORT_EXTERNAL_DATA) + "/vocab";
  o.output = (dir / "model.gguf").string();
  {
    ThreadPool pool(2);
    const Status st = Synthesize(o, &pool);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  Loaded loaded;
  auto file = gguf::File::Open(o.output);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  loaded.file = std::move(*file);
  const DType want = type == "iq1_s" ? DType::kIQ1_S : DType::kIQ1_M;
  const auto file_type = loaded.file->GetInt("general.file_type");
  ASSERT_TRUE(file_type.ok());
  EXPECT_EQ(*file_type, type == "iq1_s" ? 24 : 31);
  for (const char* name : {"blk.0.attn_q.weight", "blk.1.attn_output.weight", "blk.0.ffn_up_exps.weight"}) {
    const gguf::TensorInfo* t = loaded.file->FindTensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, want) << name;
  }
  const gguf::TensorInfo* output = loaded.file->FindTensor("output.weight");
  ASSERT_NE(output, nullptr);
  EXPECT_EQ(output->type, DType::kQ5_K);

  auto model = Model::Load(*loaded.file);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<int32_t> tokens = {11, 200, 3000, 5, 17, 29, 400, 4000, 80, 9000, 123, 7, 70, 700, 7000};
  std::vector<float> one_thread;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    const Context ctx{&pool, nullptr};
    KvCacheOptions co;
    co.n_ctx = 32;
    auto cache = (*model)->NewKvCache(co);
    ASSERT_TRUE(cache.ok());
    const std::vector<float> logits = RunChunks(**model, ctx, **cache, tokens, 12, 1);
    ASSERT_EQ(logits.size(), tokens.size() * static_cast<size_t>((*model)->config().n_vocab));
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    if (threads == 1) one_thread = logits;
    EXPECT_EQ(logits, one_thread) << threads << " threads";
  }
  loaded = {};
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Types, SynthIq1Test, ::testing::Values("iq1_s", "iq1_m"), FixtureParamName);

}  // namespace
}  // namespace cohort::model::testing
