// The `cohort` command line as users and scripts call it: run prints llama2.c's story,
// logits/tokenize/inspect keep their documented shapes, synth writes models that load, and
// bad input gets a clear error and a non-zero exit.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

const std::string kCohort = std::string(COHORT_BINARY_DIR) + "/bin/cohort";
const std::string kFixtures = std::string(COHORT_TEST_DATA) + "/fixtures";
const std::string kStories = std::string(COHORT_SOURCE_DIR) + "/models/stories260K.gguf";

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// This process's scratch directory, removed when the process exits.
std::filesystem::path TempDir() {
  struct Removed {
    std::filesystem::path dir;
    ~Removed() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  };
  static const Removed scratch{std::filesystem::temp_directory_path() /
                               ("cohort-cli-test-" + std::to_string(::getpid()))};
  std::filesystem::create_directories(scratch.dir);
  return scratch.dir;
}

// Runs `cohort args` with `input` on stdin; captures stdout and stderr separately.
Output Cohort(const std::string& args, const std::string& input = "") {
  const auto dir = TempDir();
  const std::string in = (dir / "stdin").string(), out = (dir / "stdout").string(),
                    err = (dir / "stderr").string();
  std::ofstream(in, std::ios::binary) << input;
  const std::string cmd = kCohort + " -t 1 " + args + " <" + in + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.out = ReadFile(out);
  o.err = ReadFile(err);
  return o;
}

std::string Chomp(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(CliRun, StoryMatchesLlama2cReference) {
  Output o = Cohort("run -m " + kStories + " -p 'Once upon a time' -n 64 --temp 0");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Chomp(o.out), Chomp(ReadFile(kFixtures + "/llama2c/run-c-once-upon-a-time-64.txt")));
  EXPECT_NE(o.err.find("[stats] prompt 5 tokens"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("generation 64 tokens"), std::string::npos) << o.err;
}

TEST(CliRun, DefaultModelFromBosMatchesLlama2c) {
  Output o = Cohort("run -p '' -n 200 --temp 0");  // no -m: the built-in demo model
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(Chomp(o.out), Chomp(ReadFile(kFixtures + "/llama2c/run-c-greedy-200.txt")));
}

TEST(CliRun, SeededSamplingIsReproducible) {
  Output a = Cohort("run -p 'Once upon a time' -n 40 --temp 1.0 --seed 7");
  Output b = Cohort("run -p 'Once upon a time' -n 40 --temp 1.0 --seed 7");
  Output c = Cohort("run -p 'Once upon a time' -n 40 --temp 1.0 --seed 8");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
}

TEST(CliRun, MissingAndCorruptModelsFailClearly) {
  Output missing = Cohort("run -m /nonexistent/model.gguf -p hi");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/model.gguf"), std::string::npos) << missing.err;

  const std::string truncated = (TempDir() / "truncated.gguf").string();
  std::string bytes = ReadFile(kStories);
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  Output t = Cohort("run -m " + truncated + " -p hi");
  EXPECT_EQ(t.exit_code, 1);
  EXPECT_NE(t.err.find("corrupt"), std::string::npos) << t.err;
}

// A FIFO named as the model (issue 23): `serve` blocked in open() forever, with SIGINT and
// SIGTERM blocked. Now it is refused at once (`timeout` would kill a hang: exit 124).
TEST(CliServe, FifoModelIsRefusedAtOnce) {
  const std::string fifo = (TempDir() / "model.fifo").string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const std::string err = (TempDir() / "fifo.err").string();
  const int status = std::system(("timeout 10 " + kCohort + " -t 1 serve --port 0 -m " + fifo + " 2>" + err).c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << ReadFile(err);
  EXPECT_NE(ReadFile(err).find("not a regular file"), std::string::npos) << ReadFile(err);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::filesystem::remove(fifo);
}

TEST(CliRun, ContextLimitIsAClearError) {
  std::string long_prompt;
  for (int i = 0; i < 100; ++i) long_prompt += "Once upon a time ";
  Output o = Cohort("run -c 32 -p '" + long_prompt + "' -n 4 --temp 0");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("out of range"), std::string::npos) << o.err;
}

TEST(CliTokenize, ShapesOfTheCommand) {
  Output ids = Cohort("tokenize -m " + kStories, "Once upon a time");
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  EXPECT_EQ(Chomp(ids.out), "1 403 407 261 378");
  Output plain = Cohort("tokenize --no-special -m " + kStories, "Once upon a time");
  EXPECT_EQ(Chomp(plain.out), "403 407 261 378");
  Output text = Cohort("tokenize --detokenize --no-special -m " + kStories, "403 407 261 378");
  EXPECT_EQ(text.out, "Once upon a time");  // llama.cpp drops the SPM prefix space
  Output bad = Cohort("tokenize --detokenize -m " + kStories, "403 99999");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("99999"), std::string::npos);
}

TEST(CliLogits, MatchesLlamaCppGoldens) {
  const std::string name = "tiny-qwen3-f32";
  nlohmann::json golden = nlohmann::json::parse(ReadFile(kFixtures + "/golden/" + name + ".golden.json"));
  std::vector<int> ids = golden["prompt_ids"].get<std::vector<int>>();
  std::string list;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) list += ',';
    list += std::to_string(ids[i]);
  }
  const std::string out = (TempDir() / "logits.f32").string();
  Output o = Cohort("logits -m " + kFixtures + "/models/" + name + ".gguf --tokens " + list + " -o " + out);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::string got = ReadFile(out), want = ReadFile(kFixtures + "/golden/" + name + ".logits.f32");
  ASSERT_EQ(got.size(), want.size());
  const float* g = reinterpret_cast<const float*>(got.data());
  const float* w = reinterpret_cast<const float*>(want.data());
  float max_abs = 0;
  for (size_t i = 0; i < got.size() / 4; ++i) max_abs = std::max(max_abs, std::fabs(g[i] - w[i]));
  EXPECT_LE(max_abs, 1e-4f);

  Output bad = Cohort("logits -m " + kStories + " --tokens 1,2,x -o " + out);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("'x' is not a token id"), std::string::npos) << bad.err;
}

TEST(CliInspect, PrintsArchitectureTensorsAndMemory) {
  Output o = Cohort("inspect " + kFixtures + "/models/tiny-deepseek2-f32.gguf -c 1024");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("arch=deepseek2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("blk.1.ffn_gate_exps.weight"), std::string::npos);
  // MLA caches 64 + 32 floats per token and layer: 3 layers x 1024 positions x 96 x 4 bytes.
  EXPECT_NE(o.out.find("KV cache      1.12 MiB (f32)"), std::string::npos) << o.out;
}

// Every synth shape, cut to 2 layers, writes a file that loads and generates.
TEST(CliSynth, EveryShapeLoadsAndRuns) {
  const std::string vocab = std::string(COHORT_EXTERNAL_DATA) + "/vocab";
  ASSERT_TRUE(std::filesystem::exists(vocab)) << "run scripts/fetch-test-data.sh";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"llama-3.2-1b", "q4_0"}, {"qwen3-0.6b", "q8_0"}, {"qwen3-1.7b", "q4_k_m"},
      {"qwen3-30b-a3b-mini", "q4_k_m"}, {"deepseek-v3-mini", "q4_k_m"}};
  for (const auto& [shape, type] : cases) {
    const std::string path = (TempDir() / (shape + ".gguf")).string();
    Output s = Cohort("synth --shape " + shape + " --type " + type + " --layers 2 --vocab-dir " + vocab +
                   " -o " + path);
    ASSERT_EQ(s.exit_code, 0) << shape << ": " << s.err;
    Output r = Cohort("run -m " + path + " -p 'Hello there' -n 3 --temp 0 -c 64");
    EXPECT_EQ(r.exit_code, 0) << shape << ": " << r.err;
    EXPECT_NE(r.err.find("generation 3 tokens"), std::string::npos) << shape << ": " << r.err;
    std::filesystem::remove(path);
  }
  Output bad = Cohort("synth --shape no-such-model -o /tmp/x.gguf");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown --shape"), std::string::npos);
}

}  // namespace

namespace {

TEST(CliBench, CommReportsAllReduceAgainstRawExchange) {
  Output o = Cohort("bench --comm --comm-iterations 50");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("tcp all-reduce / raw"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("shm all-reduce / raw"), std::string::npos) << o.out;
}

TEST(CliBench, JsonHasTheDocumentedFields) {
  Output o = Cohort("bench -m " + kStories + " -p 16 -n 8 -r 2 --json");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_GT(j["pp_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["tg_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["weight_bytes_per_token"].get<double>(), 0.0);
}

}  // namespace
