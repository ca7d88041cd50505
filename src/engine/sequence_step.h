// SequenceStep: the rules that end a generating sequence and decide which of its text may be
// shown, applied one sampled token at a time. The Generator (one sequence) and the Scheduler
// (many sequences in one batch) both drive their sequences through it, so end-of-generation
// tokens, stop strings, max_tokens, the context limit and the held-back text (an incomplete
// UTF-8 character, a tail that may still become a stop string) follow one set of rules.
// Sampling and cancellation stay with the callers: they differ between the two.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "engine/generator.h"
#include "engine/sampling.h"
#include "engine/stop.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {

// Receives text as it becomes final: well-formed UTF-8, never part of a stop string, never
// empty. The pieces, in order, are the completion's text.
using TextOut = std::function<void(std::string_view text)>;

// The sampling parameters a request runs with: its own, plus a -inf logit bias on every
// end-of-generation token when it asks for ignore_eos (llama.cpp's ignore_eos).
SamplingParams EffectiveSampling(const GenerateOptions& options, const tokenizer::Tokenizer& tok);

// One sequence's decoding state after its prompt: the stream decoder, the stop matcher and the
// count of generated tokens. Not thread-safe; one per sequence.
class SequenceStep {
 public:
  // Uses options.max_tokens, stop (checked by ValidateStopStrings) and ignore_eos. The sequence
  // holds n_prompt prompt tokens in a context of n_ctx positions (n_prompt < n_ctx). `tok` must
  // outlive the step.
  SequenceStep(const tokenizer::Tokenizer& tok, const GenerateOptions& options, int32_t n_prompt,
               int32_t n_ctx);

  // Records a sampled token and sends `out` the text that became final with it (none for an
  // end-of-generation token, which is never rendered). Returns why the sequence ends with this
  // token, checked in this order: kEos, kStop (a stop string completed), kLength (max_tokens
  // generated, or the context is full); nullopt while it goes on.
  std::optional<FinishReason> Push(int32_t token, const TextOut& out);

  // Ends the sequence for `reason`, what Push returned. Unless a stop string ended it, the text
  // held back is final now: the decoder's incomplete bytes (as U+FFFD) go through the stop
  // matcher, where a stop string may still complete (the reason becomes kStop), and then the
  // matcher's held tail follows as a piece of its own. Returns the final reason. A cancelled
  // sequence does not call this: its held-back text is dropped.
  FinishReason Finish(FinishReason reason, const TextOut& out);

  int32_t n_generated() const { return n_generated_; }
  // The stop string (index into options.stop) that ended the text, or -1.
  int stop_index() const { return stop_.matched_index(); }

 private:
  // Sanitizes bytes the decoder released, passes them through the stop matcher and sends `out`
  // what the matcher lets through.
  void Show(std::string_view piece, const TextOut& out);

  const tokenizer::Tokenizer& tok_;
  tokenizer::StreamDecoder decoder_;
  StopMatcher stop_;
  int32_t max_tokens_;
  bool ignore_eos_;
  int32_t n_prompt_;
  int32_t n_ctx_;
  int32_t n_generated_ = 0;
  bool finished_ = false;
  std::string clean_;  // scratch: sanitized decoder output
  std::string shown_;  // scratch: what the stop matcher releases
};

}  // namespace cohort::engine
