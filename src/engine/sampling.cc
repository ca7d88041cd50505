// The sampler chain. Every stage works on `candidates_` in place so that, after the buffers
// are sized for the vocabulary in the constructor, sampling a token allocates nothing.
#include "engine/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/ops.h"

namespace cohort::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// top-p first sorts only this many candidates; most distributions reach p well inside it.
constexpr size_t kTopPPartialSort = 256;

bool Better(float logit_a, int32_t id_a, float logit_b, int32_t id_b) {
  return logit_a > logit_b || (logit_a == logit_b && id_a < id_b);
}

std::string FloatStr(float v) { return std::to_string(v); }

}  // namespace

Status SamplingParams::Validate(int32_t n_vocab) const {
  if (!(temperature >= 0.0f) || std::isinf(temperature)) {
    return InvalidArgument("temperature must be a finite number >= 0, got " +
                           FloatStr(temperature));
  }
  if (top_k < 0) {
    return InvalidArgument("top_k must be >= 0 (0: off), got " + std::to_string(top_k));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return InvalidArgument("top_p must be in (0, 1], got " + FloatStr(top_p));
  }
  if (!(min_p >= 0.0f && min_p < 1.0f)) {
    return InvalidArgument("min_p must be in [0, 1), got " + FloatStr(min_p));
  }
  if (!(repeat_penalty > 0.0f) || std::isinf(repeat_penalty)) {
    return InvalidArgument("repeat_penalty must be a finite number > 0, got " +
                           FloatStr(repeat_penalty));
  }
  if (repeat_last_n < -1 || repeat_last_n > kMaxRepeatLastN) {
    return InvalidArgument("repeat_last_n must be in [-1, " + std::to_string(kMaxRepeatLastN) +
                           "], got " + std::to_string(repeat_last_n));
  }
  if (!std::isfinite(presence_penalty) || !std::isfinite(frequency_penalty)) {
    return InvalidArgument("presence_penalty and frequency_penalty must be finite");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0 || (n_vocab > 0 && token >= n_vocab)) {
      return InvalidArgument("logit_bias names token " + std::to_string(token) +
                             ", outside the vocabulary");
    }
    // -inf bans a token; +inf or NaN would make the distribution meaningless.
    if (std::isnan(bias) || bias == std::numeric_limits<float>::infinity()) {
      return InvalidArgument("logit_bias for token " + std::to_string(token) + " is not a number");
    }
  }
  return Status::Ok();
}

SamplingParams GreedyParams() {
  SamplingParams p;
  p.temperature = 0.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  return p;
}

void ComputeLogprobs(std::span<const float> logits, int32_t token, int top_n, Logprobs& out) {
  COHORT_CHECK(!logits.empty());
  COHORT_CHECK(token >= 0 && static_cast<size_t>(token) < logits.size());
  float max_logit = kNegInf;
  for (float l : logits) max_logit = std::max(max_logit, l);
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - max_logit);
  const double log_z = max_logit + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<float>(logits[id] - log_z); };

  out.chosen = {token, logprob(token)};
  out.top.clear();
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  if (n == 0) return;
  // Insertion into a short sorted list: top_n is small (the OpenAI API caps it at 20).
  for (int32_t id = 0; id < static_cast<int32_t>(logits.size()); ++id) {
    const float l = logits[id];
    if (out.top.size() == n && !Better(l, id, logits[out.top.back().token], out.top.back().token)) {
      continue;
    }
    if (out.top.size() == n) out.top.pop_back();
    auto pos = out.top.end();
    while (pos != out.top.begin() && Better(l, id, logits[(pos - 1)->token], (pos - 1)->token)) {
      --pos;
    }
    out.top.insert(pos, TokenLogprob{id, 0.0f});
  }
  for (auto& t : out.top) t.logprob = logprob(t.token);
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
  COHORT_CHECK_GT(n_vocab, 0);
  const Status status = params.Validate(n_vocab);
  COHORT_CHECK(status.ok());  // callers validate user input first; this is the backstop
  adjusted_.resize(n_vocab);
  probs_.resize(n_vocab);
  candidates_.reserve(n_vocab);
  counts_.assign(n_vocab, 0);
  listed_.assign(n_vocab, 0);
  penalized_.reserve(params.repeat_last_n < 0 ? n_vocab
                                              : std::min(n_vocab, params.repeat_last_n + 1));
  if (params.repeat_last_n > 0) window_.assign(params.repeat_last_n, 0);
}

void Sampler::Reset() {
  for (int32_t id : penalized_) {
    counts_[id] = 0;
    listed_[id] = 0;
  }
  penalized_.clear();
  window_next_ = 0;
  window_size_ = 0;
  rng_.seed(params_.seed);
}

void Sampler::Accept(int32_t token) {
  COHORT_CHECK(token >= 0 && token < n_vocab_);
  if (params_.repeat_last_n == 0) return;
  if (params_.repeat_last_n > 0) {
    if (window_size_ == window_.size()) {
      const int32_t evicted = window_[window_next_];
      COHORT_CHECK_GT(counts_[evicted], 0);
      --counts_[evicted];
    } else {
      ++window_size_;
    }
    window_[window_next_] = token;
    window_next_ = (window_next_ + 1) % window_.size();
  }
  if (counts_[token]++ == 0 && !listed_[token]) {
    // A full list must hold a token that left the window (at most repeat_last_n tokens are
    // live, the new one among them): drop those, so the list stays within its reserve.
    if (params_.repeat_last_n > 0 && penalized_.size() >= window_.size()) {
      std::erase_if(penalized_, [&](int32_t id) {
        if (counts_[id] != 0) return false;
        listed_[id] = 0;
        return true;
      });
    }
    listed_[token] = 1;
    penalized_.push_back(token);
  }
}

void Sampler::ApplyBiasAndPenalties(std::span<const float> logits) {
  std::copy(logits.begin(), logits.end(), adjusted_.begin());
  for (const auto& [token, bias] : params_.logit_bias) adjusted_[token] += bias;
  const bool penalize = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                        params_.frequency_penalty != 0.0f;
  if (!penalize) return;
  for (int32_t id : penalized_) {
    const int32_t count = counts_[id];
    if (count == 0) continue;
    float& l = adjusted_[id];
    l = l > 0.0f ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
}

int32_t Sampler::Argmax() const {
  int32_t best = 0;
  for (int32_t id = 1; id < n_vocab_; ++id) {
    if (adjusted_[id] > adjusted_[best]) best = id;  // strict: ties keep the lower id
  }
  return best;
}

void Sampler::FillCandidates() {
  candidates_.clear();
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (adjusted_[id] != kNegInf) candidates_.push_back({id, adjusted_[id], 0.0f});
  }
  sorted_ = false;
}

void Sampler::SortCandidates(size_t n) {
  auto cmp = [](const Candidate& a, const Candidate& b) {
    return Better(a.logit, a.id, b.logit, b.id);
  };
  n = std::min(n, candidates_.size());
  std::partial_sort(candidates_.begin(), candidates_.begin() + n, candidates_.end(), cmp);
  if (n == candidates_.size()) sorted_ = true;
}

void Sampler::TopK(size_t k) {
  if (k == 0 || k >= candidates_.size()) return;
  if (!sorted_) {
    SortCandidates(k);
  }
  candidates_.resize(k);
  sorted_ = true;
}

double Sampler::ExpScores(float temperature) {
  float max_logit = kNegInf;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.logit);
  double sum = 0.0;
  for (auto& c : candidates_) {
    c.p = std::exp((c.logit - max_logit) / temperature);
    sum += c.p;
  }
  return sum;
}

void Sampler::Softmax(float temperature) {
  const double sum = ExpScores(temperature);
  for (auto& c : candidates_) c.p = static_cast<float>(c.p / sum);
}

void Sampler::TopP(float p) {
  if (p >= 1.0f || candidates_.size() <= 1) return;
  Softmax(1.0f);  // llama.cpp measures top-p and min-p before temperature
  size_t sorted_n = sorted_ ? candidates_.size() : 0;
  double cum = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (i == sorted_n) {
      sorted_n = std::max(kTopPPartialSort, 2 * sorted_n);
      SortCandidates(sorted_n);
      sorted_n = std::min(sorted_n, candidates_.size());
    }
    cum += candidates_[i].p;
    if (cum >= p) {
      candidates_.resize(i + 1);
      sorted_ = true;
      return;
    }
  }
}

void Sampler::MinP(float p) {
  if (p <= 0.0f || candidates_.empty()) return;
  float max_logit = kNegInf;
  for (const auto& c : candidates_) max_logit = std::max(max_logit, c.logit);
  // p_i >= p * p_max  <=>  logit_i >= max_logit + log(p); the max itself always stays.
  const float threshold = max_logit + std::log(p);
  std::erase_if(candidates_, [&](const Candidate& c) { return c.logit < threshold; });
}

double Sampler::Uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1), 53 bits
}

int32_t Sampler::Draw(float temperature) {
  // Softmax(temperature) without its normalising pass: each probability is normalised only when
  // the scan reaches it, the same float and the same running double sum as normalising every
  // candidate first, but the tail past the drawn token (often most of a 10^5-token
  // vocabulary) is never divided.
  const double sum = ExpScores(temperature);
  const double u = Uniform();
  double cum = 0.0;
  for (const auto& c : candidates_) {
    cum += static_cast<float>(c.p / sum);
    if (u < cum) return c.id;
  }
  return candidates_.back().id;  // u within rounding of 1
}

bool Sampler::Truncates() const {
  return (params_.top_k > 0 && params_.top_k < n_vocab_) || params_.top_p < 1.0f || params_.min_p > 0.0f;
}

int32_t Sampler::DrawFromAll(float temperature) {
  // No stage truncates (the OpenAI API's default): every token is a candidate, so the
  // distribution is the vectorised softmax of the whole row, in id order as the candidate
  // list would be, without building the list. Banned (-inf) tokens get probability 0.
  bool any = false;
  for (int32_t id = 0; id < n_vocab_; ++id) any |= adjusted_[id] != kNegInf;
  if (!any) return -1;
  for (int32_t id = 0; id < n_vocab_; ++id) probs_[id] = adjusted_[id] / temperature;
  kernels::Softmax(probs_.data(), n_vocab_);
  // The running sum skips whole blocks before the drawn token on their sums (four chains of
  // float adds, not one long chain of double adds), then walks the block that holds it.
  constexpr int32_t kBlock = 64;
  const double u = Uniform();
  double cum = 0.0;
  int32_t id = 0;
  for (; id + kBlock <= n_vocab_; id += kBlock) {
    float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int32_t k = 0; k < kBlock; k += 4) {
      for (int32_t j = 0; j < 4; ++j) part[j] += probs_[id + k + j];
    }
    const double block = static_cast<double>(part[0] + part[1]) + static_cast<double>(part[2] + part[3]);
    if (u < cum + block) break;
    cum += block;
  }
  for (; id < n_vocab_; ++id) {
    cum += probs_[id];
    if (probs_[id] > 0.0f && u < cum) return id;
  }
  // u within rounding of 1: the last token with any probability.
  for (id = n_vocab_ - 1; id > 0 && probs_[id] == 0.0f; --id) {
  }
  return id;
}

int32_t Sampler::Pick() {
  if (params_.greedy()) return Argmax();
  if (!Truncates()) {
    const int32_t token = DrawFromAll(params_.temperature);
    return token < 0 ? Argmax() : token;  // every token banned: nothing to draw from, keep determinism
  }
  FillCandidates();
  if (candidates_.empty()) return Argmax();  // every token banned: nothing to draw from, keep determinism
  TopK(static_cast<size_t>(params_.top_k));
  TopP(params_.top_p);
  MinP(params_.min_p);
  return Draw(params_.temperature);
}

void Sampler::ApplyGrammarMask() {
  const std::vector<uint64_t>& mask = grammar_->Mask();
  for (int32_t id = 0; id < n_vocab_; ++id) {
    if (((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u) == 0) adjusted_[id] = kNegInf;
  }
}

int32_t Sampler::Sample(std::span<const float> logits, Logprobs* logprobs, int top_n) {
  COHORT_CHECK_EQ(logits.size(), static_cast<size_t>(n_vocab_));
  ApplyBiasAndPenalties(logits);
  int32_t token = Pick();
  if (grammar_ != nullptr && !grammar_->Allows(token)) {
    ApplyGrammarMask();
    token = Pick();
  }
  if (logprobs != nullptr) ComputeLogprobs(logits, token, top_n, *logprobs);
  return token;
}

void Sampler::AcceptSampled(int32_t token) {
  Accept(token);
  if (grammar_ != nullptr) (void)grammar_->Accept(token);  // a refused token leaves only end-of-generation
}

}  // namespace cohort::engine
