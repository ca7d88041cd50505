// Generator: one request from prompt to finished text on a single sequence — prompt
// evaluated in batches, then the decode loop with sampling, UTF-8-safe streaming, stop strings,
// end-of-generation tokens, limits and cancellation. The scheduler with continuous batching
// runs each of its sequences through the same pieces (Sampler, SequenceStep).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/context.h"
#include "core/dtype.h"
#include "core/status.h"
#include "engine/grammar.h"
#include "engine/loaded_model.h"
#include "engine/sampling.h"
#include "model/model.h"

namespace cohort::engine {

constexpr int kMaxTopLogprobs = 20;  // the OpenAI API's limit

// Why a generation ended. OpenAI's finish_reason maps kStop and kEos to "stop".
enum class FinishReason {
  kStop,       // a stop string appeared
  kLength,     // max_tokens generated, or the context is full
  kEos,        // the model produced an end-of-generation token
  kCancelled,  // the stream callback returned false
};
const char* FinishReasonName(FinishReason reason);  // "stop", "length", "eos", "cancelled"

struct GenerateOptions {
  int32_t max_tokens = 256;          // completion tokens at most (0: evaluate nothing)
  SamplingParams sampling;
  std::vector<std::string> stop;     // see StopMatcher; at most kMaxStopStrings
  // End-of-generation tokens get a -inf logit bias (llama.cpp's ignore_eos), so the
  // generation runs to max_tokens or the context limit.
  bool ignore_eos = false;
  DType kv_type = DType::kF16;       // kF32 (exact), kF16 (llama.cpp's default) or kQ8_0
  int32_t n_ctx = 0;                 // context in tokens (0: the model's training context)
  int32_t n_batch = 512;             // prompt tokens per Forward
  int32_t top_logprobs = -1;         // -1: no logprobs; 0: the chosen token's; n: plus top n
  // How text prompts are tokenized: add BOS/EOS as the metadata says; turn special-token
  // text (e.g. from a chat template) into those tokens.
  bool add_special = true;
  bool parse_special = true;
  // Constrained decoding: only text this grammar allows is generated, and the generation
  // ends (kEos) when the grammar is complete and allows nothing more. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;
  // The completion's text shows control tokens as their text (tool-call markers such as
  // "<|tool_call_begin|>", which the server parses out of the text).
  bool render_special = false;
  Status Validate() const;
};

struct GenerateResult {
  std::string text;                  // the completion (no prompt, no stop string)
  std::vector<int32_t> tokens;       // every sampled token, a final end-of-generation included
  std::vector<Logprobs> logprobs;    // one per token when options.top_logprobs >= 0
  FinishReason finish_reason = FinishReason::kLength;
  int stop_index = -1;               // which options.stop string ended it, or -1
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;     // == tokens.size()
  double prompt_seconds = 0.0;       // prompt evaluation
  double generation_seconds = 0.0;   // first sample to the end
};

// Receives the completion's text as it becomes final: whole UTF-8 characters, never a part
// of a stop string. The text is always well-formed UTF-8: bytes that cannot form a character
// (a stray continuation byte, a character cut off by the end of the generation) arrive as
// U+FFFD. The pieces concatenate to GenerateResult::text. Returning false cancels
// the generation (a client went away).
using StreamCallback = std::function<bool(std::string_view text)>;

class SequenceStep;  // sequence_step.h: the end rules and held-back text of one sequence

// Runs generations one at a time on one sequence slot of a KV cache it keeps between calls
// (re-allocated only when n_ctx or kv_type change). Not thread-safe.
//
// Context limit: prompt + completion never exceed n_ctx. A prompt that leaves no room for a
// completion token (prompt_tokens > n_ctx, or == n_ctx with max_tokens > 0) is rejected
// with kOutOfRange before any work, as the OpenAI API rejects it; a max_tokens that would
// run past n_ctx is not an error: the generation ends with kLength when the context is full.
class Generator {
 public:
  Generator(LoadedModel& model, const Context& ctx);

  // Generates after prompt token ids (each in [0, n_vocab); BOS is not added).
  Result<GenerateResult> Generate(std::span<const int32_t> prompt, const GenerateOptions& options,
                                  const StreamCallback& on_text = {});
  // Tokenizes text (options.add_special / parse_special) and generates after it.
  Result<GenerateResult> GenerateText(std::string_view prompt, const GenerateOptions& options,
                                      const StreamCallback& on_text = {});

 private:
  Status CheckPrompt(std::span<const int32_t> prompt, const GenerateOptions& options,
                     int32_t n_ctx) const;
  Status EnsureCache(int32_t n_ctx, DType type);
  // Feeds tokens starting at position `pos`, n_batch per Forward; logits of the last one.
  Status EvalPrompt(std::span<const int32_t> tokens, int32_t n_batch);
  Status EvalOne(int32_t token, int32_t pos);
  // Samples, streams and decodes until the generation ends; sets result.finish_reason.
  Status DecodeLoop(const GenerateOptions& options, Sampler& sampler, SequenceStep& step,
                    const StreamCallback& on_text, GenerateResult& result);

  LoadedModel& model_;
  Context ctx_;
  std::unique_ptr<model::KvCache> cache_;
  model::Batch batch_;
  std::vector<float> logits_;  // [n_vocab] the logits of the last evaluated token
};

}  // namespace cohort::engine
