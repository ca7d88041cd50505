// Pipeline micro-batches: the split's boundaries (multiples of 4, no short tail), and a long
// prompt run through pipeline stages in micro-batches gives exactly the logits of the same
// prompt in one batch on one rank (and of the pipeline sending whole steps).
#include "parallel/micro_batch.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/executor.h"
#include "parallel/model_plan.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kPrompt = 150;  // tokens, all in one Forward
constexpr int kCtx = 256;

TEST(SplitMicroBatchesTest, CoversTheBatchOnAlignedBoundaries) {
  std::vector<TokenRange> r;
  for (int64_t n = 1; n <= 300; ++n) {
    for (int64_t m : {0, 1, 4, 5, 16, 128}) {
      SplitMicroBatches(n, m, &r);
      ASSERT_FALSE(r.empty());
      EXPECT_EQ(r.front().begin, 0);
      EXPECT_EQ(r.back().end, n);
      for (size_t i = 0; i < r.size(); ++i) {
        if (i > 0) {
          EXPECT_EQ(r[i].begin, r[i - 1].end);
        }
        EXPECT_EQ(r[i].begin % kMicroBatchAlign, 0) << n << " " << m;
        if (r.size() > 1) {
          EXPECT_GE(r[i].size(), kMicroBatchAlign) << n << " " << m;
        }
      }
    }
  }
  SplitMicroBatches(512, 128, &r);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[1].begin, 128);
  SplitMicroBatches(255, 128, &r);  // fewer than 2 micro-batches' worth: whole
  EXPECT_EQ(r.size(), 1u);
  SplitMicroBatches(129, 4, &r);  // 32 shares of ~4 round up to 8: 16 of them, and a 1-token
                                  // tail that joins the range before it
  EXPECT_EQ(r.size(), 16u);
  EXPECT_EQ(r.back().size(), 9);
}

model::Batch LongPrompt(int n_vocab) {
  model::Batch b;
  for (int i = 0; i < kPrompt; ++i) b.Add(i == 0 ? 1 : (7 * i + 3) % n_vocab, i, 0, true);
  return b;
}

std::vector<float> OneRankLogits(const gguf::File& file) {
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  auto m = model::Model::Load(file);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  model::KvCacheOptions o;
  o.n_ctx = kCtx;
  auto cache = (*m)->NewKvCache(o);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  const model::Batch b = LongPrompt((*m)->config().n_vocab);
  std::vector<float> logits(static_cast<size_t>(kPrompt) * (*m)->config().n_vocab);
  const Status s = (*m)->Forward(ctx, b, **cache, logits);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return logits;
}

Result<std::vector<float>> PipelineLogits(const gguf::File& file, const std::string& layout, int n_ranks,
                                          int micro_batch_tokens) {
  COHORT_ASSIGN_OR_RETURN(plan::ShardPlan plan, PlanOfLayout(file, layout, n_ranks, {}));
  COHORT_ASSIGN_OR_RETURN(auto transports, comm::MakeLocalGroup(comm::TransportKind::kTcp, n_ranks));
  ExecutorOptions options;
  options.micro_batch_tokens = micro_batch_tokens;
  std::vector<float> logits;
  const std::vector<Status> statuses = comm::RunOnRanks(n_ranks, [&](int r) -> Status {
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    comm::Communicator world(std::move(transports[r]));
    COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(file));
    COHORT_ASSIGN_OR_RETURN(auto exec, Executor::Create(std::move(m), plan, world, options));
    if (r != 0) return exec->Serve(ctx);
    model::KvCacheOptions o;
    o.n_ctx = kCtx;
    COHORT_ASSIGN_OR_RETURN(auto cache, exec->NewKvCache(o));
    const model::Batch b = LongPrompt(exec->config().n_vocab);
    logits.resize(static_cast<size_t>(kPrompt) * exec->config().n_vocab);
    const Status s = exec->Forward(ctx, b, *cache, logits);
    const Status stop = exec->Stop();
    return s.ok() ? stop : s;
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].Annotate("rank " + std::to_string(r));
  }
  return logits;
}

struct Case {
  const char* model;
  const char* layout;
  int n_ranks;
  float tol;  // 0 unless a tensor-parallel all-reduce sums partials in another order
};

class MicroBatchTest : public ::testing::TestWithParam<Case> {};

TEST_P(MicroBatchTest, LongPromptInMicroBatchesEqualsOneBatch) {
  const Case& c = GetParam();
  auto file = gguf::File::Open(FixtureModel(c.model));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const std::vector<float> want = OneRankLogits(**file);
  // 16 tokens: 9 micro-batches of 16 and 6 (150 = 9 * 16 + 6); 36: 4 of 40, the last 30.
  for (int micro : {0, 16, 36}) {
    auto got = PipelineLogits(**file, c.layout, c.n_ranks, micro);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ(got->size(), want.size());
    float max_diff = 0.0f;
    for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, std::fabs((*got)[i] - want[i]));
    EXPECT_LE(max_diff, c.tol) << "micro_batch_tokens " << micro;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, MicroBatchTest,
                         ::testing::Values(Case{"tiny-llama-q4_0", "pp", 2, 0.0f},
                                           Case{"tiny-llama-f32", "pp", 2, 0.0f},
                                           Case{"tiny-deepseek2-f32", "pp", 3, 0.0f},
                                           Case{"tiny-qwen3-f32", "hybrid:2", 4, 1e-4f}),
                         [](const auto& info) {
                           std::string name = std::string(info.param.model) + "_" + info.param.layout +
                                              std::to_string(info.param.n_ranks);
                           for (char& ch : name) {
                             if (ch == '-' || ch == ':') ch = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace cohort::parallel::testing
