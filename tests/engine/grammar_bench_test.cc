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
  const auto schema = nlohmann::json::parse(
      R"({"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},"units":{"enum":["metric","imperial"]}},"required":["city","days","units"]})");
  auto g = Grammar::Parse(*JsonSchemaToGbnf(schema, "schema", true));
  ASSERT_TRUE(g.ok());
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
  auto run = [&](bool constrained, int* restarts) {
    Sampler sampler(params, n_vocab);
    if (constrained) sampler.SetGrammar(std::make_unique<GrammarMatcher>(*g, vocab));
    *restarts = 0;
    const auto start = Clock::now();
    for (int i = 0; i < kSteps; ++i) {
      const int32_t t = sampler.Sample(rows[static_cast<size_t>(i) % rows.size()]);
      sampler.AcceptSampled(t);
      if (constrained && (sampler.grammar_done() || tok.IsEndOfGeneration(t))) {
        sampler.SetGrammar(std::make_unique<GrammarMatcher>(*g, vocab));
        ++*restarts;
      }
    }
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count() / kSteps;
  };
  int restarts = 0;
  const double plain_ms = run(false, &restarts);
  const double grammar_ms = run(true, &restarts);
  std::printf("vocab tables: %.1f ms once; sampling step, %d-token vocab: plain %.3f ms, grammar %.3f ms "
              "(+%.3f ms per step, %d grammar completions in %d steps)\n",
              vocab_ms, n_vocab, plain_ms, grammar_ms, grammar_ms - plain_ms, restarts, kSteps);
  EXPECT_GT(grammar_ms, 0.0);
}

}  // namespace
}  // namespace cohort::engine
