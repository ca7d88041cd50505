// Continuous batching on real models: N requests generating together in one batch must give
// exactly the tokens and text each gives alone (the single-sequence Generator is the
// reference), whether they start together or join while others run; plus the queue bound,
// cancellation, limits and stop strings.
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "engine/generator.h"
#include "engine/loaded_model.h"

namespace cohort::engine {
namespace {

std::string ModelPath(const std::string& name) {
  return std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf";
}

// Drains a handle until done.
RequestOutput Collect(RequestHandle& handle) {
  RequestOutput total;
  while (!total.done) {
    RequestOutput part;
    if (handle.Wait(part, std::chrono::milliseconds(100))) total.Append(std::move(part));
  }
  return total;
}

class SchedulerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = LoadedModel::Open(ModelPath(GetParam()));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    model_ = std::move(*loaded);
  }

  // Prompts of different lengths, so sequences sit at different positions in each batch.
  std::vector<std::vector<int32_t>> Prompts(int n) const {
    const char* texts[] = {"Once upon a time", "The cat", "Lily and Tom went to the park to play",
                           "One day", "A big red ball rolled down the hill and", "Sam",
                           "She was happy because", "The sun"};
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < n; ++i) prompts.push_back(model_->tokenizer().Encode(texts[i % 8], true, true));
    return prompts;
  }

  GenerateResult Alone(const std::vector<int32_t>& prompt, const GenerateOptions& options) {
    return Alone(prompt, options, ctx_);
  }
  GenerateResult Alone(const std::vector<int32_t>& prompt, const GenerateOptions& options, const Context& ctx) {
    Generator generator(*model_, ctx);
    auto result = generator.Generate(prompt, options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : GenerateResult{};
  }

  static GenerateOptions Greedy(int max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.sampling = GreedyParams();
    o.kv_type = DType::kF32;
    o.n_ctx = 256;
    return o;
  }

  static SchedulerOptions Sched(int n_parallel) {
    SchedulerOptions s;
    s.n_parallel = n_parallel;
    s.n_ctx = 256;
    s.kv_type = DType::kF32;
    s.n_batch = 7;  // small: prompts arrive in several chunks beside decoding sequences
    return s;
  }

  void ExpectSame(const GenerateResult& alone, const RequestOutput& batched, size_t i) {
    EXPECT_TRUE(batched.status.ok()) << batched.status.ToString();
    EXPECT_EQ(batched.tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(batched.text, alone.text) << "request " << i;
    EXPECT_EQ(batched.finish_reason, alone.finish_reason) << "request " << i;
    EXPECT_EQ(batched.prompt_tokens, alone.prompt_tokens);
    EXPECT_EQ(batched.completion_tokens, alone.completion_tokens);
  }

  // Four seeded samplers (penalties, logprobs) batched under `ctx` give what each gives alone.
  void ExpectSeededSamplingEqualsAlone(const Context& ctx);

  ThreadPool pool_{1};  // inline: deterministic and fast on a busy machine
  Logger log_{LogLevel::kWarn};
  Context ctx_{&pool_, &log_};
  std::unique_ptr<LoadedModel> model_;
};

TEST_P(SchedulerTest, ConcurrentGreedyEqualsAlone) {
  const auto prompts = Prompts(6);
  const GenerateOptions options = Greedy(40);
  Scheduler scheduler(*model_, ctx_, Sched(4));  // 6 requests, 4 slots: two wait in the queue
  ASSERT_TRUE(scheduler.Start().ok());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const auto& prompt : prompts) {
    auto handle = scheduler.Submit({prompt, options});
    ASSERT_TRUE(handle.ok()) << handle.status().ToString();
    handles.push_back(*handle);
  }
  std::vector<RequestOutput> outputs;
  for (auto& h : handles) outputs.push_back(Collect(*h));
  for (size_t i = 0; i < prompts.size(); ++i) ExpectSame(Alone(prompts[i], options), outputs[i], i);
  const SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.requests_finished, 6u);
  EXPECT_EQ(stats.slots_active, 0);
  // Batching happened: far fewer forward passes than tokens evaluated.
  uint64_t tokens = 0;
  for (const auto& o : outputs) tokens += o.prompt_tokens + o.completion_tokens;
  EXPECT_LT(stats.forward_passes, tokens / 2);
}

TEST_P(SchedulerTest, JoiningWhileOthersRunEqualsAlone) {
  const auto prompts = Prompts(5);
  const GenerateOptions options = Greedy(48);
  // References first: a model runs one Forward at a time, so never beside the scheduler.
  std::vector<GenerateResult> alone;
  for (const auto& prompt : prompts) alone.push_back(Alone(prompt, options));
  Scheduler scheduler(*model_, ctx_, Sched(3));
  ASSERT_TRUE(scheduler.Start().ok());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<RequestOutput> outputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto handle = scheduler.Submit({prompts[i], options});
    ASSERT_TRUE(handle.ok());
    handles.push_back(*handle);
    // Let the earlier ones produce a few tokens before the next joins.
    while (outputs[i].completion_tokens < 3 * static_cast<int>(i % 2 + 1) && !outputs[i].done) {
      RequestOutput part;
      if (handles[i]->Wait(part, std::chrono::milliseconds(100))) outputs[i].Append(std::move(part));
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (!outputs[i].done) outputs[i].Append(Collect(*handles[i]));
    ExpectSame(alone[i], outputs[i], i);
  }
}

void SchedulerTest::ExpectSeededSamplingEqualsAlone(const Context& ctx) {
  const auto prompts = Prompts(4);
  std::vector<GenerateOptions> options;
  for (int i = 0; i < 4; ++i) {
    GenerateOptions o = Greedy(32);
    o.sampling = SamplingParams{};
    o.sampling.temperature = 0.9f;
    o.sampling.seed = 1000 + i;
    o.sampling.presence_penalty = 0.5f * i;
    o.top_logprobs = i;
    options.push_back(o);
  }
  std::vector<GenerateResult> references;
  for (size_t i = 0; i < prompts.size(); ++i) references.push_back(Alone(prompts[i], options[i], ctx));
  Scheduler scheduler(*model_, ctx, Sched(4));
  ASSERT_TRUE(scheduler.Start().ok());
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < prompts.size(); ++i) handles.push_back(*scheduler.Submit({prompts[i], options[i]}));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const RequestOutput out = Collect(*handles[i]);
    const GenerateResult& alone = references[i];
    ExpectSame(alone, out, i);
    ASSERT_EQ(out.logprobs.size(), alone.logprobs.size());
    for (size_t t = 0; t < out.logprobs.size(); ++t) {
      EXPECT_EQ(out.logprobs[t].chosen.token, alone.logprobs[t].chosen.token);
      // A batch of several rows may sum in another order than a single row (matmul vs
      // matvec kernels): the chosen tokens must agree, their logprobs to rounding.
      EXPECT_NEAR(out.logprobs[t].chosen.logprob, alone.logprobs[t].chosen.logprob,
                  1e-5 + 1e-4 * std::fabs(alone.logprobs[t].chosen.logprob));
      EXPECT_EQ(out.logprobs[t].top.size(), static_cast<size_t>(i));
    }
  }
}

TEST_P(SchedulerTest, SeededSamplingEqualsAlone) { ExpectSeededSamplingEqualsAlone(ctx_); }

// With a pool of several threads the slots of a step sample on different threads: each
// slot's sampler (its RNG, penalties) is its own, so the tokens are still each one's alone.
TEST_P(SchedulerTest, SeededSamplingOnAPoolEqualsAlone) {
  ThreadPool pool(4);
  ExpectSeededSamplingEqualsAlone(Context{&pool, &log_});
}

TEST_P(SchedulerTest, StopStringEndsTheText) {
  const auto prompt = Prompts(1)[0];
  const GenerateResult full = Alone(prompt, Greedy(40));
  ASSERT_GT(full.text.size(), 12u);
  GenerateOptions options = Greedy(40);
  options.stop = {full.text.substr(full.text.size() / 2, 3)};
  const GenerateResult alone = Alone(prompt, options);
  Scheduler scheduler(*model_, ctx_, Sched(2));
  ASSERT_TRUE(scheduler.Start().ok());
  auto other = scheduler.Submit({Prompts(3)[2], Greedy(40)});  // a neighbour in the batch
  auto handle = scheduler.Submit({prompt, options});
  ASSERT_TRUE(handle.ok() && other.ok());
  const RequestOutput out = Collect(**handle);
  ExpectSame(alone, out, 0);
  EXPECT_EQ(out.finish_reason, FinishReason::kStop);
  EXPECT_EQ(out.stop_index, 0);
  EXPECT_EQ(out.text, full.text.substr(0, full.text.find(options.stop[0])));
  Collect(**other);
}

INSTANTIATE_TEST_SUITE_P(Models, SchedulerTest,
                         ::testing::Values("stories260K", "tiny-qwen3-f32", "tiny-llama-q4_0",
                                           "tiny-qwen3moe-f32", "tiny-deepseek2-f32"));

class SchedulerLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = LoadedModel::Open(ModelPath("stories260K"));
    ASSERT_TRUE(loaded.ok());
    model_ = std::move(*loaded);
  }
  ScheduledRequest Long() const {
    ScheduledRequest r;
    r.prompt = {1, 403, 407, 261, 378};
    r.options.max_tokens = 200;
    r.options.ignore_eos = true;
    r.options.sampling = GreedyParams();
    return r;
  }
  static SchedulerOptions Sched(int n_parallel, int max_queue = SchedulerOptions{}.max_queue) {
    SchedulerOptions s;
    s.n_parallel = n_parallel;
    s.max_queue = max_queue;
    s.n_ctx = 256;
    return s;
  }
  ThreadPool pool_{1};
  Logger log_{LogLevel::kWarn};
  Context ctx_{&pool_, &log_};
  std::unique_ptr<LoadedModel> model_;
};

TEST_F(SchedulerLimitsTest, QueueFullIsResourceExhausted) {
  Scheduler scheduler(*model_, ctx_, Sched(1, 1));
  ASSERT_TRUE(scheduler.Start().ok());
  std::vector<std::shared_ptr<RequestHandle>> accepted;
  int refused = 0;
  for (int i = 0; i < 4; ++i) {
    auto h = scheduler.Submit(Long());
    if (h.ok()) {
      accepted.push_back(*h);
    } else {
      EXPECT_EQ(h.status().code(), StatusCode::kResourceExhausted);
      ++refused;
    }
  }
  // One slot and one queue place: at most two of four fit.
  EXPECT_GE(refused, 2);
  for (auto& h : accepted) {
    const RequestOutput out = Collect(*h);
    EXPECT_EQ(out.completion_tokens, 200);
    EXPECT_EQ(out.finish_reason, FinishReason::kLength);
  }
}

// The n choices of one request go in together: the three are admitted in one step and run
// side by side, so they take the forward passes of one request alone (one prefill, then one
// step a token), however late the caller's thread runs after queueing the first.
TEST_F(SchedulerLimitsTest, SubmitAllRunsTheChoicesSideBySide) {
  Scheduler scheduler(*model_, ctx_, Sched(4));
  ASSERT_TRUE(scheduler.Start().ok());
  ScheduledRequest r = Long();
  r.options.max_tokens = 30;
  auto alone = scheduler.Submit(r);
  ASSERT_TRUE(alone.ok());
  EXPECT_EQ(Collect(**alone).completion_tokens, 30);
  const uint64_t passes_alone = scheduler.stats().forward_passes;
  for (int round = 0; round < 5; ++round) {
    const uint64_t before = scheduler.stats().forward_passes;
    auto three = scheduler.SubmitAll({r, r, r});
    ASSERT_TRUE(three.ok()) << three.status().ToString();
    ASSERT_EQ(three->size(), 3u);
    for (auto& h : *three) EXPECT_EQ(Collect(*h).completion_tokens, 30);
    EXPECT_EQ(scheduler.stats().forward_passes - before, passes_alone) << "round " << round;
  }
}

// All or none: three choices that the queue cannot hold are refused together, and nothing of
// them runs.
TEST_F(SchedulerLimitsTest, SubmitAllPastTheQueueRefusesEveryChoice) {
  Scheduler scheduler(*model_, ctx_, Sched(1, 2));
  ASSERT_TRUE(scheduler.Start().ok());
  auto three = scheduler.SubmitAll({Long(), Long(), Long()});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(scheduler.stats().queue_depth, 0);
  EXPECT_EQ(scheduler.stats().forward_passes, 0u);
  // A bad choice refuses them all as well.
  ScheduledRequest bad = Long();
  bad.prompt = {1, model_->config().n_vocab};
  auto mixed = scheduler.SubmitAll({Long(), bad});
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.stats().forward_passes, 0u);
  auto two = scheduler.SubmitAll({Long(), Long()});
  ASSERT_TRUE(two.ok());
  for (auto& h : *two) EXPECT_EQ(Collect(*h).completion_tokens, 200);
}

TEST_F(SchedulerLimitsTest, CancelFreesTheSlot) {
  Scheduler scheduler(*model_, ctx_, Sched(1));
  ASSERT_TRUE(scheduler.Start().ok());
  ScheduledRequest r = Long();
  r.options.max_tokens = 250;
  auto h = scheduler.Submit(r);
  ASSERT_TRUE(h.ok());
  RequestOutput first;
  while (first.tokens.empty()) (*h)->Wait(first, std::chrono::milliseconds(100));
  (*h)->Cancel();
  const RequestOutput rest = Collect(**h);
  EXPECT_EQ(rest.finish_reason, FinishReason::kCancelled);
  EXPECT_LT(rest.completion_tokens, 250);
  SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.slots_active, 0);
  EXPECT_EQ(stats.requests_cancelled, 1u);
  // The freed slot serves the next request, from an empty cache.
  auto next = scheduler.Submit(Long());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(Collect(**next).completion_tokens, 200);
}

TEST_F(SchedulerLimitsTest, BadRequestsAreRefused) {
  SchedulerOptions s;
  s.n_ctx = 16;
  Scheduler scheduler(*model_, ctx_, s);
  ASSERT_TRUE(scheduler.Start().ok());
  ScheduledRequest r = Long();
  r.prompt.assign(16, 1);
  EXPECT_EQ(scheduler.Submit(r).status().code(), StatusCode::kOutOfRange);
  r.prompt = {1, 100000};
  EXPECT_EQ(scheduler.Submit(r).status().code(), StatusCode::kInvalidArgument);
  r.prompt = {};
  EXPECT_EQ(scheduler.Submit(r).status().code(), StatusCode::kInvalidArgument);
  r = Long();
  r.options.sampling.temperature = -1.0f;
  EXPECT_EQ(scheduler.Submit(r).status().code(), StatusCode::kInvalidArgument);
  // max_tokens 0: done at once with no tokens.
  r = Long();
  r.options.max_tokens = 0;
  auto h = scheduler.Submit(r);
  ASSERT_TRUE(h.ok());
  const RequestOutput out = Collect(**h);
  EXPECT_EQ(out.completion_tokens, 0);
  EXPECT_EQ(out.prompt_tokens, 5);
  // The context bounds the completion: 11 tokens fit after a 5-token prompt in 16.
  r = Long();
  auto full = scheduler.Submit(r);
  ASSERT_TRUE(full.ok());
  const RequestOutput cut = Collect(**full);
  EXPECT_EQ(cut.completion_tokens, 11);
  EXPECT_EQ(cut.finish_reason, FinishReason::kLength);
}

TEST_F(SchedulerLimitsTest, OptionsAreValidated) {
  SchedulerOptions s;
  EXPECT_TRUE(s.Validate().ok());
  s.n_parallel = 8;
  s.n_batch = 4;  // no room for a prompt token beside 8 decoding sequences
  EXPECT_FALSE(s.Validate().ok());
  Scheduler scheduler(*model_, ctx_, s);
  EXPECT_EQ(scheduler.Start().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler.Submit(Long()).status().code(), StatusCode::kUnavailable);
  s = SchedulerOptions{};
  s.n_parallel = 0;
  EXPECT_FALSE(s.Validate().ok());
  s = SchedulerOptions{};
  s.kv_type = DType::kQ8_0;  // llama.cpp's -ctk q8_0 -ctv q8_0
  EXPECT_TRUE(s.Validate().ok());
  s.kv_type = DType::kQ4_0;
  EXPECT_FALSE(s.Validate().ok());
  s = SchedulerOptions{};
  s.cache_block_tokens = 6;  // not a multiple of 4
  EXPECT_FALSE(s.Validate().ok());
  s = SchedulerOptions{};
  s.cache_ram_bytes = -2;
  EXPECT_FALSE(s.Validate().ok());
  s = SchedulerOptions{};
  s.prefill_step_factor = 0.5;
  EXPECT_FALSE(s.Validate().ok());
  s = SchedulerOptions{};
  s.prefill_chunk = -1;
  EXPECT_FALSE(s.Validate().ok());
}

TEST_F(SchedulerLimitsTest, StopFinishesQueuedAndRunning) {
  auto scheduler = std::make_unique<Scheduler>(*model_, ctx_, Sched(1));
  ASSERT_TRUE(scheduler->Start().ok());
  auto a = scheduler->Submit(Long());
  auto b = scheduler->Submit(Long());
  ASSERT_TRUE(a.ok() && b.ok());
  scheduler->Stop();
  const RequestOutput out_b = Collect(**b);
  EXPECT_TRUE(out_b.done);
  const RequestOutput out_a = Collect(**a);
  EXPECT_TRUE(out_a.done);
  EXPECT_EQ(scheduler->Submit(Long()).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort::engine
