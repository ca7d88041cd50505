// Token sampling: turns one row of logits into the next token through a fixed chain
// (logit bias -> penalties -> top-k -> top-p -> min-p -> temperature -> draw), the order of
// llama.cpp's default chain, and reports the log-probabilities the OpenAI API exposes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "core/status.h"
#include "engine/grammar_matcher.h"

namespace cohort::engine {

// The penalty window is a ring buffer of this many tokens at most (-1 needs none).
constexpr int32_t kMaxRepeatLastN = 1 << 20;

// How to pick tokens. A plain aggregate; Validate() says whether the values make sense.
// Defaults are llama.cpp's. As there, top-p and min-p measure probabilities at temperature 1
// (before temperature is applied), and temperature 0 is greedy: the argmax after bias and
// penalties, ties to the lowest id, no random draw.
//
// Penalties (repeat, presence, frequency) count the tokens passed to Sampler::Accept() that
// lie in the last `repeat_last_n` of them (-1: all of them, 0: none, so penalties are off).
// The Generator accepts the prompt tokens as well as the generated ones, as llama.cpp's
// server does, so a penalty also discourages repeating the prompt.
struct SamplingParams {
  float temperature = 0.8f;        // 0: greedy (argmax after bias and penalties)
  int32_t top_k = 40;              // keep the k most likely tokens (0: off)
  float top_p = 0.95f;             // keep the smallest set with probability >= top_p (1: off)
  float min_p = 0.05f;             // drop tokens with p < min_p * p_max (0: off)
  float repeat_penalty = 1.0f;     // llama.cpp: logit > 0 ? logit / r : logit * r (1: off)
  int32_t repeat_last_n = 64;      // the penalty window, in accepted tokens (-1: unbounded)
  float presence_penalty = 0.0f;   // OpenAI: logit -= presence * (count > 0)
  float frequency_penalty = 0.0f;  // OpenAI: logit -= frequency * count
  uint64_t seed = 0;               // same seed, same logits -> same tokens
  std::map<int32_t, float> logit_bias;  // added to the logit of the token id (-inf bans it)

  // n_vocab > 0 also checks the logit_bias token ids against the vocabulary.
  Status Validate(int32_t n_vocab = 0) const;
  bool greedy() const { return temperature == 0.0f; }
};

// Greedy decoding: temperature 0 and every other stage a no-op.
SamplingParams GreedyParams();

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;
};

// Log-probabilities of one step under the model's own distribution: log_softmax of the raw
// logits, before bias, penalties, truncation and temperature (what llama.cpp's server and
// vLLM report by default).
struct Logprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // the top_n most likely, best first, ties to the lower id
};

// Fills `out` for `token` and the `top_n` most likely tokens of `logits`. `out.top` keeps its
// capacity between calls.
void ComputeLogprobs(std::span<const float> logits, int32_t token, int top_n, Logprobs& out);

// One sequence's sampler: owns the RNG (std::mt19937_64 seeded with params.seed; uniforms
// are built from its top 53 bits, so a seed gives the same draws on every platform) and
// scratch buffers sized once for the vocabulary, so sampling allocates nothing per token.
class Sampler {
 public:
  Sampler(const SamplingParams& params, int32_t n_vocab);

  // Picks the next token from logits[n_vocab]. Does not record it: call Accept() for the
  // token actually used. When `logprobs` is given, fills it for the chosen token and the
  // `top_n` most likely ones.
  int32_t Sample(std::span<const float> logits, Logprobs* logprobs = nullptr, int top_n = 0);

  // Records a token of the sequence for the penalties (prompt and generated tokens alike).
  void Accept(int32_t token);
  // Records a sampled token: Accept(), and moves the grammar (if any) past it.
  void AcceptSampled(int32_t token);

  // Constrains every later Sample() to the tokens `grammar` allows: the drawn token is
  // checked first, and only when the grammar refuses it is the whole vocabulary masked and
  // the token drawn again from what is left (the same distribution as masking first).
  void SetGrammar(std::unique_ptr<GrammarMatcher> grammar) { grammar_ = std::move(grammar); }
  GrammarMatcher* grammar() { return grammar_.get(); }
  // The grammar is complete and allows nothing more: the generation should end.
  bool grammar_done() const { return grammar_ != nullptr && grammar_->done(); }
  // Forgets the accepted tokens and restarts the RNG from the seed.
  void Reset();

  const SamplingParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

  // The logits after bias and penalties as the last Sample() saw them (for tests).
  std::span<const float> adjusted_logits() const { return adjusted_; }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };

  void ApplyBiasAndPenalties(std::span<const float> logits);
  // The chain after bias and penalties, on adjusted_.
  int32_t Pick();
  void ApplyGrammarMask();
  int32_t Argmax() const;
  void FillCandidates();
  void TopK(size_t k);
  void TopP(float p);
  void MinP(float p);
  int32_t Draw(float temperature);
  int32_t DrawFromAll(float temperature);
  bool Truncates() const;
  // Sets each candidate's p to exp((logit - max) / temperature), unnormalised; returns the sum.
  double ExpScores(float temperature);
  void Softmax(float temperature);
  void SortCandidates(size_t n);
  double Uniform();

  SamplingParams params_;
  int32_t n_vocab_;
  std::mt19937_64 rng_;
  std::vector<float> adjusted_;        // [n_vocab] logits after bias and penalties
  std::vector<float> probs_;           // [n_vocab] DrawFromAll's distribution
  std::vector<Candidate> candidates_;  // [<= n_vocab] the surviving tokens
  bool sorted_ = false;                // candidates_ sorted by logit, best first
  std::vector<int32_t> counts_;        // [n_vocab] occurrences in the penalty window
  std::vector<int32_t> window_;        // ring buffer of the last repeat_last_n tokens
  size_t window_next_ = 0;
  size_t window_size_ = 0;
  std::vector<int32_t> penalized_;     // each token with counts_ > 0 once (plus stale ones)
  std::vector<uint8_t> listed_;        // [n_vocab] 1 when the token is in penalized_
  std::unique_ptr<GrammarMatcher> grammar_;  // null: unconstrained
};

}  // namespace cohort::engine
