// SequenceStep on its own, with a real SPM tokenizer built from a small hand-made vocabulary:
// which token ends a sequence and why (end-of-generation, stop string, max_tokens, context),
// and which text it shows, piece by piece, including what is held back until Finish.
#include "engine/sequence_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace cohort::engine {
namespace {

enum Tok : int32_t {
  kUnk, kBos, kEos, kByteC3, kByteE2, kByte80, kHello, kWorld, kBang, kThe, kEnd, kVocab
};

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::unique_ptr<tokenizer::Tokenizer> MakeTokenizer() {
  tokenizer::VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "<0xC3>", "<0xE2>", "<0x80>",
              "\xE2\x96\x81Hello", "\xE2\x96\x81world", "!", "\xE2\x96\x81the",
              "\xE2\x96\x81" "end"};
  v.scores = std::vector<float>(v.tokens.size(), 0.0f);
  v.types = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1};
  v.bos_id = kBos;
  v.eos_id = kEos;
  v.unk_id = kUnk;
  v.add_bos = true;
  v.add_eos = false;
  auto tok = tokenizer::Tokenizer::FromVocab(v);
  COHORT_CHECK(tok.ok());
  return std::move(tok).value();
}

GenerateOptions Options(int32_t max_tokens, std::vector<std::string> stop = {}) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.stop = std::move(stop);
  return o;
}

// Drives a step as the Generator and the Scheduler do: Push each token until one ends the
// sequence, then Finish; records every piece of text and the reason.
struct Outcome {
  std::vector<std::string> pieces;
  std::optional<FinishReason> pushed;  // what the last Push returned
  FinishReason finished = FinishReason::kCancelled;
  int32_t n_generated = 0;
  int stop_index = -1;
};

Outcome Drive(const GenerateOptions& o, const std::vector<int32_t>& tokens, int32_t n_prompt = 1,
          int32_t n_ctx = 64) {
  static const std::unique_ptr<tokenizer::Tokenizer> tok = MakeTokenizer();
  SequenceStep step(*tok, o, n_prompt, n_ctx);
  Outcome run;
  const TextOut out = [&](std::string_view text) { run.pieces.emplace_back(text); };
  for (int32_t token : tokens) {
    run.pushed = step.Push(token, out);
    if (run.pushed) {
      run.finished = step.Finish(*run.pushed, out);
      break;
    }
  }
  run.n_generated = step.n_generated();
  run.stop_index = step.stop_index();
  return run;
}

using Pieces = std::vector<std::string>;

TEST(SequenceStep, EndOfGenerationEndsWithoutText) {
  const Outcome r = Drive(Options(10), {kHello, kEos, kWorld});
  EXPECT_EQ(r.pushed, FinishReason::kEos);
  EXPECT_EQ(r.finished, FinishReason::kEos);
  EXPECT_EQ(r.pieces, (Pieces{" Hello"}));
  EXPECT_EQ(r.n_generated, 2);
}

TEST(SequenceStep, IgnoreEosTreatsItAsAnOrdinaryToken) {
  GenerateOptions o = Options(3);
  o.ignore_eos = true;
  const Outcome r = Drive(o, {kHello, kEos, kWorld});
  EXPECT_EQ(r.finished, FinishReason::kLength);
  EXPECT_EQ(r.pieces, (Pieces{" Hello", " world"}));  // a control token renders as nothing
  EXPECT_EQ(r.n_generated, 3);
}

TEST(SequenceStep, StopStringAcrossTokensIsNeverShown) {
  const Outcome r = Drive(Options(10, {"xyz", "d!"}), {kWorld, kBang, kThe});
  EXPECT_EQ(r.pushed, FinishReason::kStop);
  EXPECT_EQ(r.finished, FinishReason::kStop);
  EXPECT_EQ(r.stop_index, 1);
  EXPECT_EQ(r.pieces, (Pieces{" worl"}));  // the held "d" is dropped with the stop string
  EXPECT_EQ(r.n_generated, 2);
}

TEST(SequenceStep, MaxTokensEndsWithLength) {
  const Outcome r = Drive(Options(2), {kHello, kWorld, kBang});
  EXPECT_EQ(r.finished, FinishReason::kLength);
  EXPECT_EQ(r.pieces, (Pieces{" Hello", " world"}));
  EXPECT_EQ(r.n_generated, 2);
}

TEST(SequenceStep, AFullContextEndsWithLength) {
  // Three prompt tokens in five positions leave room for two.
  const Outcome r = Drive(Options(100), {kHello, kWorld, kBang}, /*n_prompt=*/3, /*n_ctx=*/5);
  EXPECT_EQ(r.finished, FinishReason::kLength);
  EXPECT_EQ(r.n_generated, 2);
}

TEST(SequenceStep, HeldStopPrefixIsReleasedByFinishAsItsOwnPiece) {
  // "end of story" could still follow " the end": "e", then "end", are held back.
  const Outcome r = Drive(Options(2, {"end of story"}), {kThe, kEnd});
  EXPECT_EQ(r.finished, FinishReason::kLength);
  EXPECT_EQ(r.pieces, (Pieces{" th", "e ", "end"}));
  EXPECT_EQ(r.stop_index, -1);
}

TEST(SequenceStep, AStopStringMayCompleteInTheDecodersHeldBytes) {
  // The lead byte C3 waits for a continuation that never comes; at the end it is U+FFFD,
  // which is the stop string.
  const Outcome r = Drive(Options(2, {kReplacement}), {kHello, kByteC3});
  EXPECT_EQ(r.pushed, FinishReason::kLength);
  EXPECT_EQ(r.finished, FinishReason::kStop);
  EXPECT_EQ(r.stop_index, 0);
  EXPECT_EQ(r.pieces, (Pieces{" Hello"}));
}

TEST(SequenceStep, TheDecodersAndTheMatchersHeldTextArriveAsTwoPieces) {
  // E2 80 is a cut-off three-byte character: two U+FFFD at the end, the second of which may
  // still begin the stop string, so the matcher releases it only when flushed.
  const Outcome r = Drive(Options(3, {kReplacement + "z"}), {kHello, kByteE2, kByte80});
  EXPECT_EQ(r.finished, FinishReason::kLength);
  EXPECT_EQ(r.pieces, (Pieces{" Hello", kReplacement, kReplacement}));
}

TEST(SequenceStep, EffectiveSamplingBansEndOfGenerationOnlyUnderIgnoreEos) {
  const std::unique_ptr<tokenizer::Tokenizer> tok = MakeTokenizer();
  GenerateOptions o = Options(1);
  o.sampling.logit_bias[kHello] = 2.0f;
  EXPECT_EQ(EffectiveSampling(o, *tok).logit_bias, o.sampling.logit_bias);
  o.ignore_eos = true;
  const SamplingParams params = EffectiveSampling(o, *tok);
  for (int32_t id = 0; id < tok->n_vocab(); ++id) {
    const auto it = params.logit_bias.find(id);
    if (tok->IsEndOfGeneration(id)) {
      ASSERT_NE(it, params.logit_bias.end()) << id;
      EXPECT_TRUE(std::isinf(it->second) && it->second < 0) << id;
    } else if (id == kHello) {
      ASSERT_NE(it, params.logit_bias.end());
      EXPECT_EQ(it->second, 2.0f);
    } else {
      EXPECT_EQ(it, params.logit_bias.end()) << id;
    }
  }
  EXPECT_TRUE(tok->IsEndOfGeneration(kEos));
}

}  // namespace
}  // namespace cohort::engine
