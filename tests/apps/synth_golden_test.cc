// llama.cpp's logits for models at real head geometry that the tiny fixtures cannot show:
// DeepSeek-V3's YaRN RoPE with its attention-scale correction and grouped expert selection
// (8 groups, 4 used), Qwen3-30B-A3B's 8-of-32 routing, Qwen3.5's DeltaNet/attention hybrid, and gpt-oss's window, sinks and MXFP4. `cohort synth` is deterministic,
// so the test rebuilds the models tools/make-synth-goldens.sh gave llama.cpp and compares
// teacher-forced logits, fed as llama.cpp was fed (a prompt batch, then one token at a time).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kCohort = std::string(COHORT_BINARY_DIR) + "/bin/cohort";
const std::string kGolden = std::string(COHORT_TEST_DATA) + "/synth-golden";

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  const std::string bytes = s.str();
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

int Sh(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// recurrent_quantized: a hybrid model with quantized weights, whose recurrent state carries
// the first one-step rounding flip of an activation into every later row: the first row must
// be exact to 1e-4, every row close and every argmax equal.
void CheckAgainstLlamaCpp(const std::string& name, bool recurrent_quantized = false) {
  const std::string vocab = std::string(COHORT_EXTERNAL_DATA) + "/vocab";
  ASSERT_TRUE(std::filesystem::exists(vocab)) << "run scripts/fetch-test-data.sh";
  std::ifstream meta_in(kGolden + "/" + name + ".json");
  ASSERT_TRUE(meta_in) << name;
  const nlohmann::json meta = nlohmann::json::parse(meta_in);
  std::string ids;
  for (int id : meta["ids"]) {
    if (!ids.empty()) ids += ',';
    ids += std::to_string(id);
  }
  const auto dir = std::filesystem::temp_directory_path() / ("cohort-synth-golden-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "model.gguf").string(), out = (dir / "logits.f32").string();
  ASSERT_EQ(Sh(kCohort + " -t 2 synth --shape " + meta["shape"].get<std::string>() + " --type " +
               meta["type"].get<std::string>() + " --pure --layers " + std::to_string(meta["layers"].get<int>()) +
               " --vocab-dir " + vocab + " -o " + model + " 2>/dev/null"),
            0);
  ASSERT_EQ(Sh(kCohort + " -t 1 logits -m " + model + " --tokens " + ids + " --prompt-batch " +
               std::to_string(meta["n_prompt"].get<int>()) + " -o " + out),
            0);
  const std::vector<float> got = ReadFloats(out), want = ReadFloats(kGolden + "/" + name + ".logits.f32");
  std::filesystem::remove_all(dir);
  const size_t rows = meta["ids"].size();
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size() % rows, 0u);
  const size_t n_vocab = got.size() / rows;

  // The quantized-model criterion of the fixtures: one-step rounding flips of activations
  // may touch a row, so most rows must be exact to 1e-4, all close, and every argmax equal.
  float max_abs = 0.0f;
  size_t rows_exact = 0;
  for (size_t r = 0; r < rows; ++r) {
    float row_max = 0.0f;
    size_t arg_got = 0, arg_want = 0;
    for (size_t i = 0; i < n_vocab; ++i) {
      const size_t k = r * n_vocab + i;
      row_max = std::max(row_max, std::fabs(got[k] - want[k]));
      if (got[k] > got[r * n_vocab + arg_got]) arg_got = i;
      if (want[k] > want[r * n_vocab + arg_want]) arg_want = i;
    }
    EXPECT_EQ(arg_got, arg_want) << name << " row " << r;
    max_abs = std::max(max_abs, row_max);
    rows_exact += row_max <= 1e-4f ? 1 : 0;
  }
  if (recurrent_quantized) {
    float first_row = 0.0f;
    for (size_t i = 0; i < n_vocab; ++i) first_row = std::max(first_row, std::fabs(got[i] - want[i]));
    EXPECT_LE(first_row, 1e-4f) << name;
    EXPECT_LE(max_abs, 0.1f) << name;
    return;
  }
  EXPECT_LE(max_abs, 0.05f) << name;
  EXPECT_GE(rows_exact * 10, rows * 9) << name << ": " << rows_exact << " of " << rows << " rows within 1e-4";
}

TEST(SynthGolden, DeepSeekV3YarnAndGroupedRoutingMatchLlamaCpp) {
  CheckAgainstLlamaCpp("deepseek-v3-mini-q8_0");
}

TEST(SynthGolden, Qwen3MoeMatchesLlamaCpp) { CheckAgainstLlamaCpp("qwen3-30b-a3b-mini-q8_0"); }

// Qwen3.5's hybrid: three gated DeltaNet layers (conv state, recurrent state) then a gated
// full-attention layer with partial interleaved M-RoPE, the prompt as one batch then 4 decode
// steps. F32, so that no quantized activation's rounding flip runs on through the state.
TEST(SynthGolden, Qwen35HybridMatchesLlamaCpp) { CheckAgainstLlamaCpp("qwen3.5-0.8b-f32"); }

// Qwen3.5-35B-A3B's layer structure at Q8_0: 8-of-32 softmax routing with renormalised
// weights and the sigmoid-gated shared expert, beside the DeltaNet and gated attention.
TEST(SynthGolden, Qwen35MoeMatchesLlamaCpp) {
  CheckAgainstLlamaCpp("qwen3.5-35b-a3b-mini-q8_0", /*recurrent_quantized=*/true);
}
// gpt-oss with an 8-position window: a 16-token prompt and 32 single-token steps cross it on
// the sliding layer; sinks, biases, YaRN and the clamped SwiGLU; F32, and MXFP4 experts
// (llama.cpp's repacked AVX2 order on x86).
TEST(SynthGolden, GptOssF32AcrossTheWindowMatchesLlamaCpp) { CheckAgainstLlamaCpp("gpt-oss-test-f32"); }

TEST(SynthGolden, GptOssMxfp4ExpertsMatchLlamaCpp) { CheckAgainstLlamaCpp("gpt-oss-test-mxfp4"); }

}  // namespace
