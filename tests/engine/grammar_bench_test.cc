// Benchmark (label slow): one sampling step on Llama 3's 128K vocabulary, plain and
// constrained by a JSON-schema grammar, to set against a decode step of the 1B shape
// (bench/grammar-decode.sh measures that one end to end). Random logits make the drawn
// token usually refused, so most constrained steps mask the whole vocabulary: the worst case
// for the check-the-drawn-token-first shortcut. A new matcher every time the grammar
// completes, so the lazily built tables' cold start is counted too.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "engine/sampling.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {
namespace {

TEST(GrammarBench, MaskedSamplingStep) {
  auto file = gguf::File::Open(std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(file.ok());
  auto tok_or = tokenizer::Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok_or.ok());
  const tokenizer::Tokenizer& tok = **tok_or;
  using Clock = std::chrono::steady_clock;
  const auto vocab_start = Clock::now();
  auto vocab = std::make_shared<const TokenVocab>(tok);
  const double vocab_ms = std::chrono::duration<double, std::milli>(Clock::now() - vocab_start).count();
  // A free string (mostly the check-first path), a bounded one (the grammar completes every
  // few tokens: cold tables each time), and letters only (almost every draw refused).
  const auto free_schema = nlohmann::json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]})");
  const auto bounded_schema = nlohmann::json::parse(
      R"({"type":"object","properties":{"city":{"type":"string","maxLength":4},"units":{"enum":["metric","imperial"]}},"required":["city","units"]})");
  const std::pair<const char*, std::string> grammars[] = {
      {"free string", *JsonSchemaToGbnf(free_schema, "schema", true)},
      {"bounded", *JsonSchemaToGbnf(bounded_schema, "schema", true)},
      {"letters", "root ::= [a-z]+"},
  };
  const int32_t n_vocab = tok.n_vocab();
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(32, std::vector<float>(static_cast<size_t>(n_vocab)));
  for (auto& row : rows) {
    for (float& l : row) l = noise(rng);
  }
  SamplingParams params = GreedyParams();
  params.temperature = 0.8f;
  constexpr int kSteps = 300;
  auto run = [&](const std::shared_ptr<const Grammar>& g, int* restarts) {
    Sampler sampler(params, n_vocab);
    if (g != nullptr) sampler.SetGrammar(std::make_unique<GrammarMatcher>(g, vocab));
    *restarts = 0;
    const auto start = Clock::now();
    for (int i = 0; i < kSteps; ++i) {
      const int32_t t = sampler.Sample(rows[static_cast<size_t>(i) % rows.size()]);
      sampler.AcceptSampled(t);
      if (g != nullptr && (sampler.grammar_done() || tok.IsEndOfGeneration(t))) {
        sampler.SetGrammar(std::make_unique<GrammarMatcher>(g, vocab));
        ++*restarts;
      }
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / kSteps;
  };
  int restarts = 0;
  const double plain_ms = run(nullptr, &restarts);
  std::printf("vocab tables: %.1f ms once per model; plain sampling step, %d-token vocab: %.3f ms\n", vocab_ms,
              n_vocab, plain_ms);
  for (const auto& [name, gbnf] : grammars) {
    auto g = Grammar::Parse(gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const double ms = run(*g, &restarts);
    std::printf("  grammar %-12s %.3f ms per step (+%.3f ms; %d completions, each a cold matcher, in %d steps)\n", name,
                ms, ms - plain_ms, restarts, kSteps);
    EXPECT_GT(ms, 0.0);
  }
}

}  // namespace
}  // namespace cohort::engine
