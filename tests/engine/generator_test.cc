// The generation loop against a scripted model (its logits say which token comes next at each
// position) and a real SPM tokenizer built from a small hand-made vocabulary: batching of the
// prompt, limits, end-of-generation, stop strings, UTF-8-safe streaming and cancellation.
#include "engine/generator.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "engine/stop.h"
#include "tokenizer/utf8.h"

namespace cohort::engine {
namespace {

enum Tok : int32_t {
  kUnk, kBos, kEos, kNewline, kByteC3, kByteA9, kHello, kWorld, kBang, kThe, kEnd, kDot,
  kSpace, kVocab
};

std::unique_ptr<tokenizer::Tokenizer> MakeTokenizer() {
  tokenizer::VocabData v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>",
              "\xE2\x96\x81Hello", "\xE2\x96\x81world", "!", "\xE2\x96\x81the",
              "\xE2\x96\x81" "end", ".", "\xE2\x96\x81"};
  v.scores = std::vector<float>(v.tokens.size(), 0.0f);
  v.types = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1};
  v.bos_id = kBos;
  v.eos_id = kEos;
  v.unk_id = kUnk;
  v.add_bos = true;
  v.add_eos = false;
  auto tok = tokenizer::Tokenizer::FromVocab(v);
  COHORT_CHECK(tok.ok());
  return std::move(tok).value();
}

// Predicts script[pos] after the token at position pos (kDot beyond the script), with logit
// 10; kBang is always the runner-up at 5 (kDot when the script says kBang).
class ScriptModel : public model::Model {
 public:
  struct Call {
    std::vector<int32_t> positions;
    int n_logits;
  };

  ScriptModel(std::vector<int32_t> script, int n_ctx_train) : script_(std::move(script)) {
    config_.n_vocab = kVocab;
    config_.n_layer = 1;
    config_.n_ctx_train = n_ctx_train;
  }
  const model::ModelConfig& config() const override { return config_; }
  Result<std::unique_ptr<model::KvCache>> NewKvCache(
      const model::KvCacheOptions& options) const override {
    return std::make_unique<model::KvCache>(options, 1, 1, 1);
  }
  Status ForwardHidden(const Context&, const model::Batch&, model::KvCache&, std::span<float>) override {
    return Unsupported("the script model gives logits only");
  }
  Status Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits) override {
    Call call{batch.positions, 0};
    size_t row = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      const int pos = batch.positions[i];
      // The generator must feed each position exactly once, in order.
      EXPECT_EQ(pos, cache.length(0));
      const float zero = 0.0f;
      cache.Store(0, 0, pos, &zero, &zero);
      if (!batch.want_logits[i]) continue;
      ++call.n_logits;
      EXPECT_GE(logits.size(), (row + 1) * kVocab);
      std::span<float> out = logits.subspan(row * kVocab, kVocab);
      std::fill(out.begin(), out.end(), 0.0f);
      const int32_t next = pos < static_cast<int>(script_.size()) ? script_[pos] : kDot;
      out[next == kBang ? kDot : kBang] = 5.0f;
      out[next] = 10.0f;
      ++row;
    }
    calls.push_back(call);
    return Status::Ok();
  }

  std::vector<Call> calls;

 private:
  model::ModelConfig config_;
  std::vector<int32_t> script_;
};

struct Fixture {
  explicit Fixture(std::vector<int32_t> script, int n_ctx_train = 64) {
    auto m = std::make_unique<ScriptModel>(std::move(script), n_ctx_train);
    model = m.get();
    loaded = LoadedModel::FromParts(nullptr, MakeTokenizer(), std::move(m));
    pool = std::make_unique<ThreadPool>(1);
    ctx.pool = pool.get();
    ctx.log = &logger;
    generator = std::make_unique<Generator>(*loaded, ctx);
  }
  ScriptModel* model;
  std::unique_ptr<LoadedModel> loaded;
  std::unique_ptr<ThreadPool> pool;
  Logger logger{LogLevel::kOff};
  Context ctx;
  std::unique_ptr<Generator> generator;
};

GenerateOptions Greedy(int max_tokens) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling = GreedyParams();
  o.kv_type = DType::kF32;
  return o;
}

// Runs with a callback that records the streamed pieces.
Result<GenerateResult> RunStreaming(Fixture& f, const std::vector<int32_t>& prompt,
                                    const GenerateOptions& o, std::vector<std::string>* pieces) {
  return f.generator->Generate(prompt, o, [&](std::string_view text) {
    pieces->emplace_back(text);
    return true;
  });
}

std::string Join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p;
  return s;
}

// After BOS at 0 and "Hello" at 1: " world", "!", newline, then the script's kEnd at 4.
const std::vector<int32_t> kScript = {kHello, kWorld, kBang, kNewline, kThe, kEnd, kDot, kEos};

TEST(Generator, GreedyFollowsTheModelAndStreamsTheSameText) {
  Fixture f(kScript);
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos, kHello}, Greedy(5), &pieces);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{kWorld, kBang, kNewline, kThe, kEnd}));
  EXPECT_EQ(r->text, " world!\n the end");
  EXPECT_EQ(Join(pieces), r->text);
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->prompt_tokens, 2);
  EXPECT_EQ(r->completion_tokens, 5);
  // One Forward for the prompt, one per generated token but the last.
  ASSERT_EQ(f.model->calls.size(), 5u);
  EXPECT_EQ(f.model->calls[0].positions, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(f.model->calls[0].n_logits, 1);
  EXPECT_EQ(f.model->calls[4].positions, (std::vector<int32_t>{5}));
}

TEST(Generator, PromptIsEvaluatedInChunksOfNBatch) {
  Fixture f(std::vector<int32_t>(7, kThe));  // the prompt's own predictions do not matter
  GenerateOptions o = Greedy(2);
  o.n_batch = 3;
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos, kThe, kThe, kThe, kThe, kThe, kThe}, o, &pieces);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(f.model->calls.size(), 4u);
  EXPECT_EQ(f.model->calls[0].positions, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(f.model->calls[0].n_logits, 0);
  EXPECT_EQ(f.model->calls[1].positions, (std::vector<int32_t>{3, 4, 5}));
  EXPECT_EQ(f.model->calls[1].n_logits, 0);
  EXPECT_EQ(f.model->calls[2].positions, (std::vector<int32_t>{6}));
  EXPECT_EQ(f.model->calls[2].n_logits, 1);
  EXPECT_EQ(f.model->calls[3].positions, (std::vector<int32_t>{7}));
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{kThe, kDot}));
}

TEST(Generator, EndOfGenerationStopsAndIsNotRendered) {
  Fixture f(kScript);
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, Greedy(100));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kEos);
  EXPECT_EQ(r->tokens.back(), kEos);
  EXPECT_EQ(r->completion_tokens, 7);
  EXPECT_EQ(r->text, " world!\n the end.");
}

TEST(Generator, IgnoreEosBansEndOfGenerationTokens) {
  Fixture f(kScript);
  GenerateOptions o = Greedy(8);
  o.ignore_eos = true;
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->completion_tokens, 8);
  EXPECT_EQ(r->tokens[6], kBang);  // the runner-up where the model wanted </s>
  EXPECT_EQ(r->text, " world!\n the end.!.");
}

TEST(Generator, StopStringAcrossTokensIsNeverStreamed) {
  Fixture f(kScript);
  GenerateOptions o = Greedy(100);
  o.stop = {"xyz", "d!\n t"};  // spans " world", "!", "\n", " the"
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos, kHello}, o, &pieces);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kStop);
  EXPECT_EQ(r->stop_index, 1);
  EXPECT_EQ(r->text, " worl");
  EXPECT_EQ(Join(pieces), " worl");
  EXPECT_EQ(r->tokens, (std::vector<int32_t>{kWorld, kBang, kNewline, kThe}));
}

TEST(Generator, HeldBackTextIsReleasedAtTheEnd) {
  Fixture f(kScript);
  GenerateOptions o = Greedy(5);
  o.stop = {"end of story"};  // " the end" could still grow into it when max_tokens hits
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos, kHello}, o, &pieces);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->text, " world!\n the end");
  EXPECT_EQ(Join(pieces), r->text);
  EXPECT_EQ(pieces.back(), "end");
}

TEST(Generator, StreamingIsUtf8Safe) {
  // "é" arrives as two byte tokens; no streamed piece may end inside it.
  Fixture f({kHello, kByteC3, kByteA9, kByteC3, kByteA9, kBang});
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos}, Greedy(6), &pieces);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, " Hello\xC3\xA9\xC3\xA9!");
  EXPECT_EQ(Join(pieces), r->text);
  for (const auto& p : pieces) EXPECT_TRUE(tokenizer::IsValidUtf8(p)) << p;
}

TEST(Generator, BytesThatFormNoCharacterBecomeReplacementCharacters) {
  // A stray continuation byte, then a lead byte cut off by max_tokens.
  Fixture f({kHello, kByteA9, kBang, kByteC3});
  std::vector<std::string> pieces;
  auto r = RunStreaming(f, {kBos}, Greedy(4), &pieces);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, " Hello\xEF\xBF\xBD!\xEF\xBF\xBD");
  EXPECT_EQ(Join(pieces), r->text);
  for (const auto& p : pieces) EXPECT_TRUE(tokenizer::IsValidUtf8(p)) << p;
}

TEST(Generator, CallbackReturningFalseCancels) {
  Fixture f(kScript);
  int calls = 0;
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, Greedy(100),
                                 [&](std::string_view) { return ++calls < 2; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r->completion_tokens, 2);
  EXPECT_EQ(f.model->calls.size(), 2u);  // nothing decoded after the cancel
}

TEST(Generator, ContextLimits) {
  Fixture f(kScript, /*n_ctx_train=*/6);
  // A prompt larger than the context is an error before any work.
  auto too_long = f.generator->Generate(std::vector<int32_t>(7, kThe), Greedy(1));
  EXPECT_EQ(too_long.status().code(), StatusCode::kOutOfRange);
  auto full = f.generator->Generate(std::vector<int32_t>(6, kThe), Greedy(1));
  EXPECT_EQ(full.status().code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(f.model->calls.empty());
  // max_tokens past the context: generation ends with kLength when it is full.
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, Greedy(100));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->finish_reason, FinishReason::kLength);
  EXPECT_EQ(r->completion_tokens, 4);  // 2 + 4 == n_ctx
  // An explicit n_ctx overrides the model's.
  GenerateOptions o = Greedy(100);
  o.n_ctx = 5;
  auto r5 = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, o);
  ASSERT_TRUE(r5.ok());
  EXPECT_EQ(r5->completion_tokens, 3);
}

TEST(Generator, RejectsBadInput) {
  Fixture f(kScript);
  EXPECT_EQ(f.generator->Generate(std::vector<int32_t>{}, Greedy(1)).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(f.generator->Generate(std::vector<int32_t>{kBos, kVocab}, Greedy(1)).status().code(),
            StatusCode::kInvalidArgument);
  GenerateOptions o = Greedy(1);
  o.sampling.logit_bias[kVocab] = 1.0f;
  EXPECT_EQ(f.generator->Generate(std::vector<int32_t>{kBos}, o).status().code(),
            StatusCode::kInvalidArgument);
  o = Greedy(1);
  o.stop = {""};
  EXPECT_FALSE(f.generator->Generate(std::vector<int32_t>{kBos}, o).ok());
  o = Greedy(-1);
  EXPECT_FALSE(f.generator->Generate(std::vector<int32_t>{kBos}, o).ok());
  EXPECT_TRUE(f.model->calls.empty());
}

TEST(Generator, MaxTokensZeroRunsNothing) {
  Fixture f(kScript);
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, Greedy(0));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->completion_tokens, 0);
  EXPECT_EQ(r->prompt_tokens, 2);
  EXPECT_TRUE(f.model->calls.empty());
}

TEST(Generator, LogprobsPerToken) {
  Fixture f(kScript);
  GenerateOptions o = Greedy(3);
  o.top_logprobs = 2;
  auto r = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, o);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->logprobs.size(), 3u);
  // Logits: 10 for the chosen, 5 for the runner-up, 0 for the other 11 tokens.
  const double log_z = std::log(std::exp(10.0) + std::exp(5.0) + 11.0);
  EXPECT_EQ(r->logprobs[0].chosen.token, kWorld);
  EXPECT_NEAR(r->logprobs[0].chosen.logprob, 10.0 - log_z, 1e-5);
  ASSERT_EQ(r->logprobs[0].top.size(), 2u);
  EXPECT_EQ(r->logprobs[0].top[1].token, kBang);
  EXPECT_NEAR(r->logprobs[0].top[1].logprob, 5.0 - log_z, 1e-5);
}

TEST(Generator, TextPromptIsTokenizedWithBos) {
  Fixture f(kScript);
  // SPM adds the space prefix: "!" -> BOS, "▁", "!" (this vocabulary has no "▁!").
  auto r = f.generator->GenerateText("!", Greedy(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->prompt_tokens, 3);
  EXPECT_EQ(r->text, "!\n");
}

TEST(Generator, SameSeedSameTextAcrossRuns) {
  Fixture f(kScript);
  GenerateOptions o = Greedy(6);
  o.sampling = SamplingParams{};
  o.sampling.temperature = 3.0f;  // flat enough that the runner-up gets drawn sometimes
  o.sampling.top_k = 0;
  o.sampling.min_p = 0.0f;
  o.sampling.top_p = 1.0f;
  o.sampling.seed = 99;
  o.ignore_eos = true;
  auto a = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, o);
  auto b = f.generator->Generate(std::vector<int32_t>{kBos, kHello}, o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->text, b->text);
}

TEST(LoadedModel, RendersChatWithTheTemplateAndVocabularyTokens) {
  auto chatml = tokenizer::ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(chatml.ok()) << chatml.status().ToString();
  auto loaded = LoadedModel::FromParts(
      nullptr, MakeTokenizer(), std::make_unique<ScriptModel>(kScript, 64),
      std::make_unique<tokenizer::ChatTemplate>(std::move(chatml).value()));
  auto text = loaded->RenderChat({{"system", "Be brief."}, {"user", "Hi"}});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\n");

  auto bare = LoadedModel::FromParts(nullptr, MakeTokenizer(),
                                     std::make_unique<ScriptModel>(kScript, 64));
  EXPECT_EQ(bare->chat_template(), nullptr);
  EXPECT_EQ(bare->RenderChat({{"user", "Hi"}}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort::engine

namespace cohort::engine {
namespace {

// A template that writes {{ bos_token }} itself must not give a prompt with two BOS tokens
// when the tokenizer adds BOS too (llama.cpp removes the rendered one).
TEST(LoadedModel, OverrideTemplateAndBosIsNotDoubled) {
  auto llama3 = tokenizer::ChatTemplate::Builtin("llama3");
  ASSERT_TRUE(llama3.ok()) << llama3.status().ToString();
  auto loaded = LoadedModel::FromParts(nullptr, MakeTokenizer(),
                                       std::make_unique<ScriptModel>(kScript, 64));
  ASSERT_TRUE(loaded->tokenizer().add_bos());
  auto text = loaded->RenderChat({{"user", "Hi"}}, true, &*llama3);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const std::string bos = loaded->tokenizer().text(loaded->tokenizer().bos());
  EXPECT_NE(text->rfind(bos, 0), 0u) << *text;
  EXPECT_NE(text->find("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"), std::string::npos) << *text;
}

}  // namespace
}  // namespace cohort::engine
