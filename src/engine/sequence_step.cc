// The per-token end rules and the held-back text of one generating sequence: end-of-generation
// first, then the decoded text through the stop matcher, then the length limits; at the end,
// the decoder's and the matcher's held-back text.
#include "engine/sequence_step.h"

#include <limits>

#include "core/check.h"
#include "tokenizer/utf8.h"

namespace cohort::engine {

SamplingParams EffectiveSampling(const GenerateOptions& options, const tokenizer::Tokenizer& tok) {
  SamplingParams params = options.sampling;
  if (options.ignore_eos) {
    for (int32_t id = 0; id < tok.n_vocab(); ++id) {
      if (tok.IsEndOfGeneration(id)) params.logit_bias[id] = -std::numeric_limits<float>::infinity();
    }
  }
  return params;
}

SequenceStep::SequenceStep(const tokenizer::Tokenizer& tok, const GenerateOptions& options,
                           int32_t n_prompt, int32_t n_ctx)
    : tok_(tok),
      // The completion's text is its pieces as llama.cpp's server streams them: an SPM piece
      // keeps its leading space even right after BOS (" Once"), so prompt + text is the whole.
      decoder_(tok, options.render_special),
      stop_(options.stop),
      max_tokens_(options.max_tokens),
      ignore_eos_(options.ignore_eos),
      n_prompt_(n_prompt),
      n_ctx_(n_ctx) {
  COHORT_CHECK(n_prompt_ >= 0 && n_prompt_ < n_ctx_);
}

void SequenceStep::Show(std::string_view piece, const TextOut& out) {
  // Bytes the decoder released are final, so an invalid one will never become valid.
  clean_.clear();
  tokenizer::AppendSanitizedUtf8(piece, clean_);
  shown_.clear();
  stop_.Push(clean_, shown_);
  if (!shown_.empty()) out(shown_);
}

std::optional<FinishReason> SequenceStep::Push(int32_t token, const TextOut& out) {
  COHORT_CHECK(!finished_);
  ++n_generated_;
  if (!ignore_eos_ && tok_.IsEndOfGeneration(token)) return FinishReason::kEos;
  Show(decoder_.Push(token), out);
  if (stop_.stopped()) return FinishReason::kStop;
  if (n_generated_ >= max_tokens_ || n_prompt_ + n_generated_ >= n_ctx_) {
    return FinishReason::kLength;
  }
  return std::nullopt;
}

FinishReason SequenceStep::Finish(FinishReason reason, const TextOut& out) {
  COHORT_CHECK(!finished_);
  COHORT_CHECK(reason != FinishReason::kCancelled);
  COHORT_CHECK((reason == FinishReason::kStop) == stop_.stopped());
  finished_ = true;
  // After a stop string the text is complete: whatever followed it is never shown.
  if (reason == FinishReason::kStop) return reason;
  Show(decoder_.Flush(), out);
  if (stop_.stopped()) return FinishReason::kStop;
  shown_.clear();
  stop_.Flush(shown_);
  if (!shown_.empty()) out(shown_);
  return reason;
}

}  // namespace cohort::engine
