// The scheduler when the model's forward pass fails (a distributed model whose peer died or
// whose link was cut): the requests generating end at once with kUnavailable and a message
// that says so, nothing waits; with stop_on_forward_error the queued requests end too and new
// ones are refused, otherwise the next requests run.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "engine/loaded_model.h"
#include "engine/scheduler.h"

namespace cohort::engine {
namespace {

std::string ModelPath() { return std::string(COHORT_TEST_DATA) + "/fixtures/models/stories260K.gguf"; }

// The real model, whose forward fails once: on the call numbered `fail_at` (from 1), and not
// before Release(), so a test can queue requests first.
class FailingModel final : public model::Model {
 public:
  FailingModel(model::Model& m, int fail_at) : m_(m), fail_at_(fail_at) {}
  const model::ModelConfig& config() const override { return m_.config(); }
  Result<std::unique_ptr<model::KvCache>> NewKvCache(const model::KvCacheOptions& o) const override {
    return m_.NewKvCache(o);
  }
  Status Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits) override {
    if (++calls_ == fail_at_) {
      while (!released_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return IoError("tcp rank 0: rank 2 closed the connection");
    }
    return m_.Forward(ctx, batch, cache, logits);
  }
  Status ForwardHidden(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                       std::span<float> hidden) override {
    return m_.ForwardHidden(ctx, batch, cache, hidden);
  }

 private:
  model::Model& m_;
  int fail_at_;
  std::atomic<int> calls_{0};

 public:
  void Release() { released_ = true; }

 private:
  std::atomic<bool> released_{false};
};

RequestOutput Collect(RequestHandle& handle, std::chrono::milliseconds limit) {
  RequestOutput total;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!total.done && std::chrono::steady_clock::now() < deadline) {
    RequestOutput part;
    if (handle.Wait(part, std::chrono::milliseconds(50))) total.Append(std::move(part));
  }
  return total;
}

class SchedulerFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = LoadedModel::Open(ModelPath());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    real_ = std::move(*loaded);
  }

  // A bundle with the failing model; the scheduler runs 1 slot, so a second request queues.
  std::unique_ptr<LoadedModel> Failing(int fail_at) {
    auto tokenizer = tokenizer::Tokenizer::FromGguf(*real_->file());
    EXPECT_TRUE(tokenizer.ok());
    auto model = std::make_unique<FailingModel>(real_->model(), fail_at);
    failing_ = model.get();
    return LoadedModel::FromParts(nullptr, std::move(*tokenizer), std::move(model));
  }

  static SchedulerOptions Options(bool stop_on_error) {
    SchedulerOptions o;
    o.n_parallel = 1;
    o.n_ctx = 128;
    o.kv_type = DType::kF32;
    o.stop_on_forward_error = stop_on_error;
    return o;
  }

  ScheduledRequest Request(int max_tokens) const {
    ScheduledRequest r;
    r.prompt = real_->tokenizer().Encode("Once upon a time", true, true);
    r.options.max_tokens = max_tokens;
    r.options.sampling = GreedyParams();
    return r;
  }

  ThreadPool pool_{1};
  FailingModel* failing_ = nullptr;
  std::unique_ptr<LoadedModel> real_;
};

TEST_F(SchedulerFailureTest, FailedForwardEndsRunningAndQueuedAndRefusesNew) {
  auto model = Failing(4);  // the prompt, two tokens, then the failure
  Scheduler scheduler(*model, Context{&pool_, nullptr}, Options(true));
  ASSERT_TRUE(scheduler.Start().ok());
  auto running = scheduler.Submit(Request(50));
  auto queued = scheduler.Submit(Request(50));
  ASSERT_TRUE(running.ok() && queued.ok());
  failing_->Release();
  const RequestOutput a = Collect(**running, std::chrono::seconds(5));
  const RequestOutput b = Collect(**queued, std::chrono::seconds(5));
  ASSERT_TRUE(a.done);
  ASSERT_TRUE(b.done);
  EXPECT_EQ(a.status.code(), StatusCode::kUnavailable);
  EXPECT_NE(a.status.message().find("the model failed"), std::string::npos) << a.status.ToString();
  EXPECT_NE(a.status.message().find("closed the connection"), std::string::npos) << a.status.ToString();
  EXPECT_EQ(a.completion_tokens, 3);  // sampled before the failing step
  EXPECT_EQ(b.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(scheduler.failure().code(), StatusCode::kUnavailable);
  auto refused = scheduler.Submit(Request(5));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  scheduler.Stop();
}

TEST_F(SchedulerFailureTest, WithoutStopTheNextRequestsRun) {
  auto model = Failing(2);
  Scheduler scheduler(*model, Context{&pool_, nullptr}, Options(false));
  ASSERT_TRUE(scheduler.Start().ok());
  auto running = scheduler.Submit(Request(20));
  auto queued = scheduler.Submit(Request(20));
  ASSERT_TRUE(running.ok() && queued.ok());
  failing_->Release();
  const RequestOutput a = Collect(**running, std::chrono::seconds(5));
  const RequestOutput b = Collect(**queued, std::chrono::seconds(5));
  ASSERT_TRUE(a.done && b.done);
  EXPECT_EQ(a.status.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(b.status.ok()) << b.status.ToString();
  EXPECT_EQ(b.completion_tokens, 20);
  EXPECT_TRUE(scheduler.failure().ok());
  scheduler.Stop();
}

}  // namespace
}  // namespace cohort::engine
