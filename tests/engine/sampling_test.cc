// Sampler semantics: greedy ties, each truncation stage, penalties as specified, seeding, and
// a chi-square check that temperature sampling follows softmax(logits / T).
#include "engine/sampling.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <new>
#include <map>
#include <random>
#include <set>
#include <vector>

// Counts allocations while g_count_allocations is set, to check the sampler's promise of no
// allocation per token after warm-up.
namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int> g_allocations{0};
}  // namespace

[[gnu::noinline]] void* operator new(std::size_t size) {
  if (g_count_allocations.load(std::memory_order_relaxed)) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC 12 otherwise pairs the inlined free() with `new` and warns falsely.
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace cohort::engine {
namespace {

SamplingParams Plain(float temperature, uint64_t seed = 1) {
  SamplingParams p = GreedyParams();
  p.temperature = temperature;
  p.seed = seed;
  return p;
}

std::vector<float> LogitsFromProbs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::set<int32_t> Observed(Sampler& sampler, const std::vector<float>& logits, int n) {
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(sampler.Sample(logits));
  return seen;
}

TEST(SamplingParams, ValidateRejectsBadValues) {
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    return !p.Validate(100).ok();
  };
  EXPECT_TRUE(bad([](SamplingParams& p) { p.temperature = -0.1f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.temperature = std::nanf(""); }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.top_k = -1; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.top_p = 0.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.top_p = 1.01f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.min_p = 1.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.min_p = -0.1f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.repeat_penalty = 0.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.repeat_last_n = -2; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.repeat_last_n = kMaxRepeatLastN + 1; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.frequency_penalty = INFINITY; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.logit_bias[100] = 1.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.logit_bias[-1] = 1.0f; }));
  EXPECT_TRUE(bad([](SamplingParams& p) { p.logit_bias[3] = INFINITY; }));
  EXPECT_FALSE(bad([](SamplingParams& p) { p.logit_bias[3] = -INFINITY; }));
  EXPECT_FALSE(bad([](SamplingParams& p) { p.top_p = 1.0f; p.min_p = 0.0f; p.temperature = 0; }));
}

TEST(Sampler, GreedyTakesArgmaxAndTiesGoToLowestId) {
  Sampler s(Plain(0.0f), 6);
  EXPECT_EQ(s.Sample(std::vector<float>{0, 1, 5, 2, 5, 5}), 2);
  EXPECT_EQ(s.Sample(std::vector<float>{-3, -1, -2, -1, -9, -1}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{7, 7, 7, 7, 7, 7}), 0);
  EXPECT_EQ(s.Sample(std::vector<float>{0, 0, 0, 0, 0, 0.001f}), 5);
}

TEST(Sampler, GreedyIgnoresTruncationSettingsAndRng) {
  SamplingParams p = Plain(0.0f);
  p.top_k = 2;
  p.top_p = 0.1f;
  p.min_p = 0.5f;
  Sampler s(p, 4);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.Sample(std::vector<float>{1, 3, 3, 2}), 1);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> logits(300);
    for (float& l : logits) l = normal(gen);
    logits[17] = logits[250] = 50.0f;  // a tie at the top: the lower id wins in both
    SamplingParams p = Plain(1.5f, seed);
    p.top_k = 1;
    Sampler top1(p, 300);
    Sampler greedy(Plain(0.0f), 300);
    EXPECT_EQ(top1.Sample(logits), 17);
    EXPECT_EQ(greedy.Sample(logits), 17);
  }
}

TEST(Sampler, TopKKeepsExactlyKTokens) {
  SamplingParams p = Plain(1.0f);
  p.top_k = 3;
  Sampler s(p, 6);
  const std::vector<float> logits = {1.0f, 1.2f, 0.9f, 1.1f, 0.2f, 1.15f};
  EXPECT_EQ(Observed(s, logits, 3000), (std::set<int32_t>{1, 3, 5}));
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  const auto logits = LogitsFromProbs({0.05, 0.5, 0.15, 0.3});
  SamplingParams p = Plain(1.0f);
  p.top_p = 0.75f;  // 0.5 < 0.75 <= 0.5 + 0.3
  Sampler a(p, 4);
  EXPECT_EQ(Observed(a, logits, 3000), (std::set<int32_t>{1, 3}));
  p.top_p = 0.9f;  // 0.8 < 0.9 <= 0.95
  Sampler b(p, 4);
  EXPECT_EQ(Observed(b, logits, 3000), (std::set<int32_t>{1, 2, 3}));
  p.top_p = 0.4f;  // the top token alone already reaches p
  Sampler c(p, 4);
  EXPECT_EQ(Observed(c, logits, 500), (std::set<int32_t>{1}));
}

TEST(Sampler, TopPOnLargeVocabularyUsesPartialSortCorrectly) {
  // 2000 equal tokens except three: top-p must look past the partial sort of 256.
  std::vector<float> logits(2000, 0.0f);
  SamplingParams p = Plain(1.0f);
  p.top_p = 0.5f;  // needs about 1000 of the equal tokens
  Sampler s(p, 2000);
  const auto seen = Observed(s, logits, 4000);
  EXPECT_GT(*seen.rbegin(), 900);   // tokens past the first 256 are drawn...
  EXPECT_LT(*seen.rbegin(), 1100);  // ...but not past the p boundary (ties sorted by id)
}

TEST(Sampler, MinPDropsTokensBelowFractionOfMax) {
  const auto logits = LogitsFromProbs({0.5, 0.3, 0.15, 0.05});
  SamplingParams p = Plain(1.0f);
  p.min_p = 0.2f;  // threshold 0.1
  Sampler a(p, 4);
  EXPECT_EQ(Observed(a, logits, 3000), (std::set<int32_t>{0, 1, 2}));
  p.min_p = 0.5f;  // threshold 0.25
  Sampler b(p, 4);
  EXPECT_EQ(Observed(b, logits, 3000), (std::set<int32_t>{0, 1}));
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p = Plain(0.0f);
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = 8;
  Sampler s(p, 4);
  s.Accept(0);
  s.Accept(1);
  s.Accept(1);  // repeat penalty does not depend on the count
  (void)s.Sample(std::vector<float>{4.0f, -2.0f, 3.0f, 0.0f});
  const auto adj = s.adjusted_logits();
  EXPECT_FLOAT_EQ(adj[0], 2.0f);
  EXPECT_FLOAT_EQ(adj[1], -4.0f);
  EXPECT_FLOAT_EQ(adj[2], 3.0f);
  EXPECT_FLOAT_EQ(adj[3], 0.0f);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesUseCounts) {
  SamplingParams p = Plain(0.0f);
  p.presence_penalty = 1.0f;
  p.frequency_penalty = 0.5f;
  p.repeat_last_n = -1;
  Sampler s(p, 4);
  for (int32_t t : {2, 2, 2, 3}) s.Accept(t);
  (void)s.Sample(std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f});
  const auto adj = s.adjusted_logits();
  EXPECT_FLOAT_EQ(adj[0], 1.0f);
  EXPECT_FLOAT_EQ(adj[1], 1.0f);
  EXPECT_FLOAT_EQ(adj[2], 1.0f - 1.0f - 1.5f);
  EXPECT_FLOAT_EQ(adj[3], 1.0f - 1.0f - 0.5f);
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
  SamplingParams p = Plain(0.0f);
  p.frequency_penalty = 1.0f;
  p.repeat_last_n = 3;
  Sampler s(p, 5);
  const std::vector<float> zeros(5, 0.0f);
  for (int32_t t : {0, 0, 1, 2, 2, 3}) s.Accept(t);  // window: 2, 2, 3
  (void)s.Sample(zeros);
  auto adj = s.adjusted_logits();
  EXPECT_EQ(std::vector<float>(adj.begin(), adj.end()),
            (std::vector<float>{0.0f, 0.0f, -2.0f, -1.0f, 0.0f}));
  // Cycling many tokens through a short window keeps the counts exact.
  for (int i = 0; i < 100; ++i) s.Accept(i % 5);  // window: 2, 3, 4
  (void)s.Sample(zeros);
  adj = s.adjusted_logits();
  EXPECT_EQ(std::vector<float>(adj.begin(), adj.end()),
            (std::vector<float>{0.0f, 0.0f, -1.0f, -1.0f, -1.0f}));
  s.Reset();
  (void)s.Sample(zeros);
  adj = s.adjusted_logits();
  EXPECT_EQ(std::vector<float>(adj.begin(), adj.end()), zeros);
}

TEST(Sampler, PenaltiesChangeTheGreedyChoice) {
  SamplingParams p = Plain(0.0f);
  p.repeat_penalty = 1.5f;
  Sampler s(p, 3);
  const std::vector<float> logits = {2.0f, 2.9f, 1.0f};
  EXPECT_EQ(s.Sample(logits), 1);
  s.Accept(1);  // 2.9 / 1.5 < 2
  EXPECT_EQ(s.Sample(logits), 0);
}

TEST(Sampler, LogitBiasAddsAndBans) {
  SamplingParams p = Plain(0.0f);
  p.logit_bias[2] = 5.0f;
  p.logit_bias[0] = -std::numeric_limits<float>::infinity();
  Sampler s(p, 3);
  EXPECT_EQ(s.Sample(std::vector<float>{10.0f, 3.0f, 0.0f}), 2);  // 0 + 5 > 3, 10 banned
  EXPECT_EQ(s.Sample(std::vector<float>{10.0f, 6.0f, 0.0f}), 1);
  p.temperature = 1.0f;
  Sampler t(p, 3);
  EXPECT_EQ(Observed(t, {10.0f, 0.0f, 0.0f}, 2000), (std::set<int32_t>{1, 2}));
}

// Every token banned: nothing to draw from, with or without truncation; the draw falls back
// to the (deterministic) argmax instead of reading an empty or NaN distribution.
TEST(Sampler, EveryTokenBannedFallsBackToTheArgmax) {
  const float ban = -std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {0.5f, 2.0f, 1.0f, 0.0f};
  for (int32_t top_k : {0, 2}) {
    SamplingParams p = Plain(1.0f, 3);
    p.top_k = top_k;
    p.logit_bias = {{0, ban}, {1, ban}, {2, ban}, {3, ban}};
    Sampler s(p, 4);
    EXPECT_EQ(s.Sample(logits), 0) << "top_k=" << top_k;
  }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedsDiffer) {
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = 0.1f * static_cast<float>(i % 7);
  auto run = [&](uint64_t seed) {
    SamplingParams p;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8
    p.seed = seed;
    Sampler s(p, 50);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.Sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_NE(run(0), run(1));
  // Reset restarts the same draws.
  SamplingParams p = Plain(1.0f, 42);
  Sampler s(p, 50);
  std::vector<int32_t> first, second;
  for (int i = 0; i < 32; ++i) first.push_back(s.Sample(logits));
  s.Reset();
  for (int i = 0; i < 32; ++i) second.push_back(s.Sample(logits));
  EXPECT_EQ(first, second);
}

TEST(Sampler, TemperatureSamplingMatchesSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 1.7f, 0.0f};
  const float temperature = 0.7f;
  std::vector<double> expected(logits.size());
  double z = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) z += expected[i] = std::exp(logits[i] / temperature);
  for (double& e : expected) e /= z;

  Sampler s(Plain(temperature, 12345), static_cast<int32_t>(logits.size()));
  const int n = 40000;
  std::vector<int> counts(logits.size(), 0);
  for (int i = 0; i < n; ++i) ++counts[s.Sample(logits)];
  double chi2 = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = expected[i] * n;
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  // 5 degrees of freedom: P(chi2 > 20.5) = 0.001.
  EXPECT_LT(chi2, 20.5);
  // A wrong temperature (1.0) must fail the same test, so the test has power.
  double chi2_wrong = 0.0;
  double z1 = 0.0;
  for (float l : logits) z1 += std::exp(l);
  for (size_t i = 0; i < logits.size(); ++i) {
    const double e = std::exp(logits[i]) / z1 * n;
    chi2_wrong += (counts[i] - e) * (counts[i] - e) / e;
  }
  EXPECT_GT(chi2_wrong, 100.0);
}

TEST(Sampler, NoAllocationPerTokenAfterWarmUp) {
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const int32_t n_vocab = 3000;  // past the top-p partial sort
  std::vector<std::vector<float>> rows(8, std::vector<float>(n_vocab));
  for (auto& row : rows) {
    for (float& l : row) l = normal(gen);
  }
  SamplingParams p;  // every stage on
  p.top_k = 0;       // so top-p sorts past its first 256
  p.top_p = 0.99f;
  p.repeat_penalty = 1.1f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.5f;
  p.repeat_last_n = 16;
  p.logit_bias[7] = 2.0f;
  Sampler s(p, n_vocab);
  Logprobs lp;
  for (int i = 0; i < 4; ++i) s.Accept(s.Sample(rows[i % 8], &lp, 5));  // warm-up
  g_allocations = 0;
  g_count_allocations = true;
  for (int i = 0; i < 200; ++i) s.Accept(s.Sample(rows[i % 8], &lp, 5));
  g_count_allocations = false;
  EXPECT_EQ(g_allocations.load(), 0);
  // The counter itself works: a fresh Logprobs that must grow its top list allocates.
  g_count_allocations = true;
  Logprobs fresh;
  (void)s.Sample(rows[0], &fresh, 5);
  g_count_allocations = false;
  EXPECT_GT(g_allocations.load(), 0);
}

TEST(Sampler, LogprobsAreLogSoftmaxOfRawLogits) {
  const std::vector<float> logits = {0.5f, 2.0f, 2.0f, -1.0f, 1.0f};
  double z = 0.0;
  for (float l : logits) z += std::exp(l);
  SamplingParams p = Plain(0.0f);
  p.logit_bias[4] = 10.0f;  // logprobs ignore the bias
  Sampler s(p, 5);
  Logprobs lp;
  EXPECT_EQ(s.Sample(logits, &lp, 3), 4);
  EXPECT_EQ(lp.chosen.token, 4);
  EXPECT_NEAR(lp.chosen.logprob, 1.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].token, 1);  // tie between 1 and 2: lower id first
  EXPECT_EQ(lp.top[1].token, 2);
  EXPECT_EQ(lp.top[2].token, 4);
  EXPECT_NEAR(lp.top[0].logprob, 2.0 - std::log(z), 1e-6);

  ComputeLogprobs(logits, 3, 99, lp);  // top_n past the vocabulary: all of it
  ASSERT_EQ(lp.top.size(), 5u);
  double total = 0.0;
  for (const auto& t : lp.top) total += std::exp(t.logprob);
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_EQ(lp.top.back().token, 3);
  ComputeLogprobs(logits, 3, 0, lp);
  EXPECT_TRUE(lp.top.empty());
}

}  // namespace
}  // namespace cohort::engine
