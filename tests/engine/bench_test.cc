// The pp/tg benchmark on the demo model: one figure per repetition, medians of them, the
// weight bytes a generated token reads, and reports whose fields the JSON readers expect.
#include "engine/bench.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>

#include "kernels/quant.h"
#include "model/model.h"

namespace cohort::engine {
namespace {

std::string StoriesPath() { return std::string(COHORT_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }

TEST(Bench, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(Median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
}

TEST(Bench, ValidateRejectsNothingToMeasure) {
  BenchSpec spec;
  spec.n_prompt = 0;
  spec.n_gen = 0;
  EXPECT_FALSE(spec.Validate().ok());
  spec.n_gen = 1;
  EXPECT_TRUE(spec.Validate().ok());
  spec.reps = 0;
  EXPECT_FALSE(spec.Validate().ok());
  spec.reps = 1;
  spec.kv_type = DType::kQ4_0;
  EXPECT_FALSE(spec.Validate().ok());
}

TEST(Bench, WeightBytesPerTokenReadsOneEmbeddingRowAndRoutedExpertsOnly) {
  for (const char* name : {"stories260K.gguf", "tiny-llama-f32.gguf", "tiny-qwen3moe-f32.gguf"}) {
    auto file = gguf::File::Open(std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name);
    ASSERT_TRUE(file.ok()) << name;
    auto config = model::ModelConfig::FromGguf(**file);
    ASSERT_TRUE(config.ok()) << name;
    double all = 0, embd = 0, embd_rows = 1, experts = 0;
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
      all += static_cast<double>(t.n_bytes);
      if (t.name == "token_embd.weight") {
        embd = static_cast<double>(t.n_bytes);
        embd_rows = static_cast<double>(t.n_rows());
      }
      if (t.name.find("_exps.") != std::string::npos) experts += static_cast<double>(t.n_bytes);
    }
    const bool tied = (*file)->FindTensor("output.weight") == nullptr;
    double expected = all - (tied ? 0 : embd - embd / embd_rows);
    if (config->moe.n_expert > 0) {
      ASSERT_GT(experts, 0) << name;
      expected -= experts * (1.0 - static_cast<double>(config->moe.n_expert_used) / config->moe.n_expert);
    }
    EXPECT_NEAR(WeightBytesPerToken(**file, *config), expected, 1e-6 * expected) << name;
  }
}

TEST(Bench, RunsEveryRepetitionAndReportsIt) {
  BenchSpec spec;
  spec.model = StoriesPath();
  spec.n_prompt = 12;
  spec.n_gen = 4;
  spec.n_ubatch = 5;  // three passes per prompt, the last one short
  spec.reps = 3;
  ThreadPool pool(2);
  Logger log(LogLevel::kWarn);
  auto result = RunBench(spec, Context{&pool, &log});
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  const BenchResult& r = *result;
  ASSERT_EQ(r.pp_runs.size(), 3u);
  ASSERT_EQ(r.tg_runs.size(), 3u);
  for (double x : r.pp_runs) EXPECT_GT(x, 0);
  for (double x : r.tg_runs) EXPECT_GT(x, 0);
  EXPECT_EQ(r.pp_tokens_per_s, Median(r.pp_runs));
  EXPECT_EQ(r.tg_tokens_per_s, Median(r.tg_runs));
  EXPECT_EQ(r.threads, 2);
  EXPECT_EQ(r.arch_name, "llama");
  EXPECT_GT(r.n_layer, 0);
  auto file = gguf::File::Open(StoriesPath());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(r.file_bytes, static_cast<double>((*file)->file_size()));
  EXPECT_GT(r.kv_bytes, 0);
  EXPECT_GT(r.peak_rss_bytes, r.file_bytes);

  const nlohmann::json doc = nlohmann::json::parse(FormatBenchJson(spec, r));
  std::set<std::string> keys;
  for (const auto& [key, value] : doc.items()) keys.insert(key);
  EXPECT_EQ(keys, (std::set<std::string>{"model", "threads", "simd", "reps", "n_prompt", "n_gen", "n_ubatch",
                                         "pp_tokens_per_s", "tg_tokens_per_s", "pp_runs", "tg_runs",
                                         "weight_bytes_per_token", "effective_bandwidth_gb_s", "peak_rss_bytes",
                                         "file_bytes", "kv_bytes"}));
  EXPECT_EQ(doc["model"], spec.model);
  EXPECT_EQ(doc["simd"], r.simd);
  EXPECT_EQ(doc["tg_runs"].size(), 3u);
  EXPECT_EQ(doc["kv_bytes"].get<double>(), r.kv_bytes);

  const std::string table = FormatBenchTable(spec, r);
  // The level the kernels ran at (COHORT_SIMD's, or the CPU's best).
  const std::string simd = kernels::SimdLevelName(kernels::BestSimdLevel());
  EXPECT_EQ(r.simd, simd);
  EXPECT_NE(table.find("threads 2  simd " + simd + "  reps 3  kv f16  ubatch 5\n"), std::string::npos) << table;
  EXPECT_NE(table.find("pp12 "), std::string::npos) << table;
  EXPECT_NE(table.find("tg4 "), std::string::npos) << table;
}

TEST(Bench, SkipsTheMeasurementAskedAsZero) {
  BenchSpec spec;
  spec.model = StoriesPath();
  spec.n_prompt = 0;
  spec.n_gen = 3;
  spec.reps = 2;
  spec.kv_type = DType::kF32;
  ThreadPool pool(1);
  Logger log(LogLevel::kWarn);
  auto r = RunBench(spec, Context{&pool, &log});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->pp_runs.empty());
  EXPECT_EQ(r->pp_tokens_per_s, 0.0);
  EXPECT_EQ(r->tg_runs.size(), 2u);
  const std::string table = FormatBenchTable(spec, *r);
  EXPECT_EQ(table.find("\npp"), std::string::npos) << table;
  EXPECT_NE(table.find(" kv f32 "), std::string::npos) << table;

  spec.model = "/nonexistent/model.gguf";
  EXPECT_FALSE(RunBench(spec, Context{&pool, &log}).ok());
}

}  // namespace
}  // namespace cohort::engine
