// Separate processes: `cohort logits --local-ranks N --layout ...` over TCP, shared memory
// and (in builds with it) UCX
// must write the single-process logits (within 1e-4, same argmax on every row) for every
// fixture; every quantization type's tensor-parallel shares match one process; `--workers`
// reaches workers started on their own; a worker killed mid-generation makes the coordinator
// fail with a clear error within 5 s.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "process_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

// The fixtures' prompt then a few more ids, teacher-forced 5 tokens per step (several steps,
// the KV cache carried between them).
const char* kTokens = "1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,7,300,42,11,9";

std::vector<float> ReadFloats(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return {};
  std::vector<float> v(static_cast<size_t>(in.tellg()) / sizeof(float));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(float)));
  return v;
}

// Runs `cohort -t 1 logits` on a GGUF with extra arguments; returns the logits (empty on failure).
std::vector<float> LogitsOf(const std::string& path, const std::vector<std::string>& extra,
                            const std::string& tag) {
  const std::string out = ::testing::TempDir() + "cli_dist_" + tag + ".f32";
  const std::string err = ::testing::TempDir() + "cli_dist_" + tag + ".err";
  std::vector<std::string> args = {CohortBinary(), "-t", "1", "logits", "-m", path,
                                   "--tokens", kTokens, "-b", "5", "-o", out};
  args.insert(args.end(), extra.begin(), extra.end());
  Child c = Child::Start(args, err);
  const int rc = c.Wait(30000);
  if (rc != 0) {
    std::ifstream e(err);
    std::string text((std::istreambuf_iterator<char>(e)), {});
    ADD_FAILURE() << tag << ": exit " << rc << ": " << text;
    return {};
  }
  return ReadFloats(out);
}

std::vector<float> Logits(const std::string& fixture, const std::vector<std::string>& extra,
                          const std::string& tag) {
  return LogitsOf(FixtureModel(fixture), extra, tag);
}

void ExpectSame(const std::vector<float>& got, const std::vector<float>& want, int n_vocab) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  float max_diff = 0;
  for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
  EXPECT_LE(max_diff, 1e-4f);
  for (size_t r = 0; r < want.size() / n_vocab; ++r) {
    EXPECT_EQ(Argmax(got.data() + r * n_vocab, n_vocab), Argmax(want.data() + r * n_vocab, n_vocab))
        << "row " << r;
  }
}

struct Case {
  const char* name;
  std::vector<std::string> args;
};

class CliDistTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CliDistTest, LocalRanksEqualOneProcess) {
  const std::string model = GetParam();
  const std::vector<float> want = Logits(model, {}, model + "_single");
  const Case cases[] = {
      {"tp2", {"--local-ranks", "2", "--layout", "tp"}},
      {"tp3", {"--local-ranks", "3", "--layout", "tp"}},
      {"tp4", {"--local-ranks", "4", "--layout", "tp"}},
      {"pp2", {"--local-ranks", "2", "--layout", "pp"}},
      {"hybrid2x2", {"--local-ranks", "4", "--layout", "hybrid:2"}},
      {"tp211", {"--local-ranks", "3", "--layout", "tp", "--shares", "2,1,1"}},
      {"tp2_shm", {"--local-ranks", "2", "--layout", "tp", "--transport", "shm"}},
      {"hybrid2x2_shm", {"--local-ranks", "4", "--layout", "hybrid", "--transport", "shm"}},
#ifdef COHORT_HAVE_UCX
      {"tp3_ucx", {"--local-ranks", "3", "--layout", "tp", "--transport", "ucx"}},
#endif
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectSame(Logits(model, c.args, model + "_" + c.name), want, 512);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliDistTest,
                         ::testing::Values("tiny-llama-f32", "tiny-qwen2-f32", "tiny-qwen3-f32",
                                           "tiny-qwen3moe-f32", "tiny-deepseek2-f32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// Every quantization type split by tensor parallelism on its block boundaries: a one-layer
// model of qwen3-0.6b's shape (attention output 2048 columns, FFN 3072: 8 and 12 blocks of
// 256) in the type, --pure, as tp2 and as tp3 (uneven: 3+3+2 attention blocks, 4 FFN blocks
// each). A column share's activations quantize to the same blocks as the whole row's, so only
// the all-reduce's float additions differ from one process, and the one-step activation
// quantization flips they cause downstream (README of the fixtures: 0.07-0.2 on logits of ~10;
// seen here: up to 0.7% of the largest logit): within 2% of the largest logit, the same argmax
// in >= 90% of rows. A share cut off its block boundaries gives noise. The experts of a MoE
// layer (qwen3-30b-a3b-mini's) are split too, for the types big MoE files use.
struct QuantCase {
  const char* shape;
  const char* type;
};
void PrintTo(const QuantCase& c, std::ostream* os) { *os << c.shape << " " << c.type; }

class CliDistQuantTest : public ::testing::TestWithParam<QuantCase> {};

TEST_P(CliDistQuantTest, TensorParallelSharesMatchOneProcess) {
  const std::string type = GetParam().type;
  const std::string tag = std::string(GetParam().shape) + "_" + type;
  const std::string path = ::testing::TempDir() + "cli_dist_quant_" + tag + ".gguf";
  std::string out;
  const std::string err = ::testing::TempDir() + "cli_dist_quant_" + tag + ".synth.err";
  // The reference quantizers are slow: IQ4_XS's scale search over a MoE layer's experts took
  // 51 s on a 2-core Zen 3 (one thread), past RunCohort's default 30 s.
  ASSERT_EQ(RunCohort({"synth", "--shape", GetParam().shape, "--type", type, "--pure", "--layers", "1", "--vocab",
                       FixtureModel("stories260K"), "-o", path},
                      &out, err, /*timeout_ms=*/240000),
            0)
      << type;
  const std::vector<float> want = LogitsOf(path, {}, tag + "_single");
  ASSERT_FALSE(want.empty());
  const int n_vocab = 512;  // stories260K's
  ASSERT_EQ(want.size() % n_vocab, 0u);
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (const char* ranks : {"2", "3"}) {
    SCOPED_TRACE(std::string("tp") + ranks);
    const std::vector<float> got = LogitsOf(path, {"--local-ranks", ranks, "--layout", "tp"}, tag + "_tp" + ranks);
    ASSERT_EQ(got.size(), want.size());
    float max_diff = 0;
    for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, std::fabs(got[i] - want[i]));
    EXPECT_LE(max_diff, 0.02f * scale) << "largest logit " << scale;
    const size_t rows = want.size() / n_vocab;
    size_t agree = 0;
    for (size_t r = 0; r < rows; ++r) {
      agree += Argmax(got.data() + r * n_vocab, n_vocab) == Argmax(want.data() + r * n_vocab, n_vocab);
    }
    EXPECT_GE(agree, static_cast<size_t>(std::ceil(0.9 * static_cast<double>(rows)))) << agree << " of " << rows;
  }
  std::remove(path.c_str());
}

constexpr const char* kDense = "qwen3-0.6b";
constexpr const char* kMoe = "qwen3-30b-a3b-mini";
INSTANTIATE_TEST_SUITE_P(Types, CliDistQuantTest,
                         ::testing::Values(QuantCase{kDense, "q4_k"}, QuantCase{kDense, "iq4_nl"},
                                           QuantCase{kDense, "iq4_xs"}, QuantCase{kDense, "iq3_xxs"},
                                           QuantCase{kDense, "iq3_s"}, QuantCase{kDense, "iq2_xxs"},
                                           QuantCase{kDense, "iq2_xs"}, QuantCase{kDense, "iq2_s"},
                                           QuantCase{kDense, "iq1_s"}, QuantCase{kDense, "iq1_m"},
                                           QuantCase{kDense, "tq1_0"}, QuantCase{kDense, "tq2_0"},
                                           QuantCase{kDense, "mxfp4_all"}, QuantCase{kMoe, "iq4_xs"},
                                           QuantCase{kMoe, "iq2_xxs"}, QuantCase{kMoe, "mxfp4_all"}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.shape == kMoe ? "moe_" : "") + info.param.type;
                           return n;
                         });

// Workers started on their own, reached through --workers.
TEST(CliDistWorkersTest, ExplicitWorkers) {
  Child w1 = Child::Start({CohortBinary(), "worker", "--listen", "127.0.0.1:0", "--once"});
  Child w2 = Child::Start({CohortBinary(), "worker", "--listen", "127.0.0.1:0", "--once"});
  const std::string prefix = "cohort worker: listening on ";
  const std::string l1 = w1.ReadLine(10000), l2 = w2.ReadLine(10000);
  ASSERT_EQ(l1.rfind(prefix, 0), 0u) << l1;
  ASSERT_EQ(l2.rfind(prefix, 0), 0u) << l2;
  const std::string workers = l1.substr(prefix.size()) + "," + l2.substr(prefix.size());
  const std::vector<float> want = Logits("tiny-qwen3-f32", {}, "workers_single");
  ExpectSame(Logits("tiny-qwen3-f32", {"--workers", workers, "--layout", "tp"}, "workers_tp3"), want, 512);
  // The setup's progress, on stderr (a file here, not a terminal): plain lines, no carriage
  // returns, the percent never going back, ending at 100% once the ranks connect.
  std::ifstream e(::testing::TempDir() + "cli_dist_workers_tp3.err");
  const std::string err((std::istreambuf_iterator<char>(e)), {});
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  const std::regex line(R"(^cohort workers: (start|transfer|load|connect) ([0-9.]+)% .* of .*, .*/s)");
  double last = -1;
  int lines = 0;
  std::istringstream in(err);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (!std::regex_search(l, m, line)) continue;
    ++lines;
    const double pct = std::stod(m[2].str());
    EXPECT_GE(pct, last) << l;
    last = pct;
  }
  EXPECT_GE(lines, 1) << err;
  EXPECT_NE(err.find("cohort workers: connect 100.0% "), std::string::npos) << err;
  EXPECT_EQ(w1.Wait(5000), 0);
  EXPECT_EQ(w2.Wait(5000), 0);
}

// SIGKILL a worker while the coordinator generates: it must exit non-zero within 5 s with an
// error naming the lost peer. Link emulation (20 ms per message) keeps the generation going
// long enough to be interrupted.
TEST(CliDistWorkersTest, DeadWorkerFailsWithinFiveSeconds) {
  Child worker = Child::Start({CohortBinary(), "worker", "--listen", "127.0.0.1:0", "--once"});
  const std::string prefix = "cohort worker: listening on ";
  const std::string line = worker.ReadLine(10000);
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
  const std::string err = ::testing::TempDir() + "cli_dist_dead.err";
  Child coord = Child::Start({CohortBinary(), "-t", "1", "run", "-m", FixtureModel("tiny-llama-f32"),
                              "-p", "hello", "-n", "230", "-c", "256", "--temp", "0", "--workers",
                              line.substr(prefix.size()), "--link-latency-us", "20000"},
                             err);
  // 230 steps of >= 5 messages at 20 ms each take far longer than this wait.
  ::usleep(1500 * 1000);
  ASSERT_EQ(coord.Wait(0), -1) << "the coordinator finished before the worker was killed";
  const auto killed = std::chrono::steady_clock::now();
  worker.Kill();
  const int rc = coord.Wait(5000);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_NE(rc, -1) << "coordinator still running 5 s after its worker died";
  EXPECT_NE(rc, 0);
  EXPECT_LT(seconds, 5.0);
  std::ifstream e(err);
  const std::string text((std::istreambuf_iterator<char>(e)), {});
  EXPECT_NE(text.find("rank 1"), std::string::npos) << text;
  EXPECT_NE(text.find("unavailable"), std::string::npos) << text;
}

}  // namespace
}  // namespace cohort::parallel::testing
