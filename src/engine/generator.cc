// The generation loop: prompt in batches, then sample -> SequenceStep (text, stop strings,
// limits) -> decode one token, until a stop string, an end-of-generation token, a limit, or a
// cancel.
#include "engine/generator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "engine/sequence_step.h"
#include "engine/stop.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kEos: return "eos";
    case FinishReason::kCancelled: return "cancelled";
  }
  return "?";
}

Status GenerateOptions::Validate() const {
  if (max_tokens < 0) return InvalidArgument("max_tokens must be >= 0");
  COHORT_RETURN_IF_ERROR(sampling.Validate());
  COHORT_RETURN_IF_ERROR(ValidateStopStrings(stop));
  if (kv_type != DType::kF32 && kv_type != DType::kF16 && kv_type != DType::kQ8_0) {
    return InvalidArgument("the KV cache type must be f32, f16 or q8_0");
  }
  if (n_ctx < 0) return InvalidArgument("n_ctx must be >= 0 (0: the model's context)");
  if (n_batch < 1) return InvalidArgument("n_batch must be >= 1");
  if (top_logprobs < -1 || top_logprobs > kMaxTopLogprobs) {
    return InvalidArgument("top_logprobs must be in [-1, " + std::to_string(kMaxTopLogprobs) + "]");
  }
  return Status::Ok();
}

Generator::Generator(LoadedModel& model, const Context& ctx) : model_(model), ctx_(ctx) {
  logits_.resize(model_.config().n_vocab);
}

Status Generator::CheckPrompt(std::span<const int32_t> prompt, const GenerateOptions& options,
                              int32_t n_ctx) const {
  if (prompt.empty()) return InvalidArgument("the prompt has no tokens");
  const int32_t n_vocab = model_.config().n_vocab;
  for (int32_t id : prompt) {
    if (id < 0 || id >= n_vocab) {
      return InvalidArgument("prompt token " + std::to_string(id) + " is outside the vocabulary");
    }
  }
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  if (n_prompt > n_ctx || (n_prompt == n_ctx && options.max_tokens > 0)) {
    return OutOfRange("the prompt has " + std::to_string(n_prompt) +
                      " tokens; the context holds " + std::to_string(n_ctx) +
                      " with room for at least one completion token");
  }
  return Status::Ok();
}

Status Generator::EnsureCache(int32_t n_ctx, DType type) {
  if (cache_ == nullptr || cache_->n_ctx() != n_ctx || cache_->type() != type) {
    cache_.reset();  // free the old one before allocating its replacement
    model::KvCacheOptions kv;
    kv.n_ctx = n_ctx;
    kv.n_seq = 1;
    kv.type = type;
    COHORT_ASSIGN_OR_RETURN(cache_, model_.model().NewKvCache(kv));
  }
  cache_->Truncate(0, 0);
  return Status::Ok();
}

Status Generator::EvalPrompt(std::span<const int32_t> tokens, int32_t n_batch) {
  const size_t n = tokens.size();
  for (size_t begin = 0; begin < n; begin += n_batch) {
    const size_t end = std::min(n, begin + static_cast<size_t>(n_batch));
    batch_.Clear();
    for (size_t i = begin; i < end; ++i) {
      batch_.Add(tokens[i], static_cast<int32_t>(i), 0, i + 1 == n);
    }
    const size_t n_out = end == n ? logits_.size() : 0;
    COHORT_RETURN_IF_ERROR(
        model_.model().Forward(ctx_, batch_, *cache_, std::span<float>(logits_.data(), n_out)));
  }
  return Status::Ok();
}

Status Generator::EvalOne(int32_t token, int32_t pos) {
  batch_.Clear();
  batch_.Add(token, pos, 0, true);
  return model_.model().Forward(ctx_, batch_, *cache_, logits_);
}

Status Generator::DecodeLoop(const GenerateOptions& options, Sampler& sampler, SequenceStep& step,
                             const StreamCallback& on_text, GenerateResult& result) {
  const int32_t n_prompt = result.prompt_tokens;
  Logprobs logprobs;
  const bool want_logprobs = options.top_logprobs >= 0;
  bool cancelled = false;
  const TextOut out = [&](std::string_view text) {
    result.text.append(text);
    if (on_text && !on_text(text)) cancelled = true;
  };
  while (true) {
    const int32_t token =
        sampler.Sample(logits_, want_logprobs ? &logprobs : nullptr, options.top_logprobs);
    sampler.AcceptSampled(token);
    result.tokens.push_back(token);
    if (want_logprobs) result.logprobs.push_back(logprobs);
    std::optional<FinishReason> end = step.Push(token, out);
    if (!end && sampler.grammar_done()) end = FinishReason::kEos;
    // A cancel drops the held-back text, unless a stop string completed: the text is whole
    // then, so it is a stop. A cancel during Finish changes nothing: the generation is over.
    if (cancelled && end != FinishReason::kStop) {
      result.finish_reason = FinishReason::kCancelled;
      return Status::Ok();
    }
    if (end) {
      result.finish_reason = step.Finish(*end, out);
      return Status::Ok();
    }
    COHORT_RETURN_IF_ERROR(EvalOne(token, n_prompt + step.n_generated() - 1).Annotate("decode"));
  }
}

Result<GenerateResult> Generator::GenerateText(std::string_view prompt,
                                               const GenerateOptions& options,
                                               const StreamCallback& on_text) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  const std::vector<int32_t> ids =
      model_.tokenizer().Encode(prompt, options.add_special, options.parse_special);
  return Generate(ids, options, on_text);
}

Result<GenerateResult> Generator::Generate(std::span<const int32_t> prompt,
                                           const GenerateOptions& options,
                                           const StreamCallback& on_text) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  const model::ModelConfig& config = model_.config();
  COHORT_RETURN_IF_ERROR(options.sampling.Validate(config.n_vocab));
  const int32_t n_ctx = options.n_ctx > 0 ? options.n_ctx : config.n_ctx_train;
  if (n_ctx <= 0) return InvalidArgument("no context length: set n_ctx");
  COHORT_RETURN_IF_ERROR(CheckPrompt(prompt, options, n_ctx));
  const int32_t n_prompt = static_cast<int32_t>(prompt.size());

  GenerateResult result;
  result.prompt_tokens = n_prompt;
  if (options.max_tokens == 0) return result;
  COHORT_RETURN_IF_ERROR(EnsureCache(n_ctx, options.kv_type));

  Sampler sampler(EffectiveSampling(options, model_.tokenizer()), config.n_vocab);
  for (int32_t id : prompt) sampler.Accept(id);
  if (options.grammar != nullptr) {
    sampler.SetGrammar(std::make_unique<GrammarMatcher>(options.grammar, model_.grammar_vocab()));
  }
  SequenceStep step(model_.tokenizer(), options, n_prompt, n_ctx);

  const auto prompt_start = Clock::now();
  COHORT_RETURN_IF_ERROR(EvalPrompt(prompt, options.n_batch).Annotate("prompt"));
  result.prompt_seconds = SecondsSince(prompt_start);

  const auto gen_start = Clock::now();
  COHORT_RETURN_IF_ERROR(DecodeLoop(options, sampler, step, on_text, result));
  result.stop_index = step.stop_index();
  result.completion_tokens = static_cast<int32_t>(result.tokens.size());
  result.generation_seconds = SecondsSince(gen_start);
  return result;
}

}  // namespace cohort::engine
