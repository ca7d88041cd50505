// "N ranks equal 1 rank" in one process: every fixture architecture split by tensor, pipeline,
// hybrid and uneven tensor layouts over 2-4 ranks (threads over the comm layer's loopback TCP
// and shared-memory groups) must give the single-process logits within 1e-4 and the same
// greedy ids.
#include "parallel/executor.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/model_plan.h"
#include "rank_threads.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kGen = 8;

struct Layout {
  const char* name;
  const char* layout;
  int n_ranks;
  std::vector<double> shares;
};

Trace SingleRank(const gguf::File& file) { return SingleRankTrace(file, kGen); }

Result<Trace> Distributed(const gguf::File& file, const Layout& l, comm::TransportKind kind) {
  COHORT_ASSIGN_OR_RETURN(plan::ShardPlan plan, PlanOfLayout(file, l.layout, l.n_ranks, l.shares));
  return RanksAsThreadsTrace(file, plan, kind, kGen);
}

class ExecutorTest : public ::testing::TestWithParam<std::tuple<const char*, Layout>> {};

TEST_P(ExecutorTest, NRanksEqualOneRank) {
  const auto& [model_name, layout] = GetParam();
  auto file = gguf::File::Open(FixtureModel(model_name));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const Trace want = SingleRank(**file);
  // Shared memory for tp, TCP for the others: both transports carry every kind of traffic.
  const comm::TransportKind kind =
      std::string(layout.layout) == "tp" ? comm::TransportKind::kShm : comm::TransportKind::kTcp;
  auto got = Distributed(**file, layout, kind);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameTrace(*got, want, 1e-4f);
}

const Layout kLayouts[] = {
    {"tp2", "tp", 2, {}},        {"tp3", "tp", 3, {}},        {"tp4", "tp", 4, {}},
    {"pp2", "pp", 2, {}},        {"hybrid2x2", "hybrid:2", 4, {}},
    {"tp_uneven_211", "tp", 3, {2, 1, 1}},
};

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ExecutorTest,
    ::testing::Combine(::testing::Values("tiny-llama-f32", "tiny-qwen2-f32", "tiny-qwen3-f32",
                                         "tiny-qwen3moe-f32", "tiny-deepseek2-f32"),
                       ::testing::ValuesIn(kLayouts)),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// Three stages need three layers: only deepseek2's fixture has them.
const Layout kThreeStages[] = {{"pp3", "pp", 3, {}}, {"pp3_uneven", "pp", 3, {1, 2, 1}}};
INSTANTIATE_TEST_SUITE_P(ThreeLayers, ExecutorTest,
                         ::testing::Combine(::testing::Values("tiny-deepseek2-f32"),
                                            ::testing::ValuesIn(kThreeStages)),
                         [](const auto& info) { return std::string(std::get<1>(info.param).name); });

TEST(ExecutorSetupTest, MoreStagesThanLayersIsAClearError) {
  auto file = gguf::File::Open(FixtureModel("tiny-llama-f32"));
  ASSERT_TRUE(file.ok());
  auto got = Distributed(**file, {"pp3", "pp", 3, {}}, comm::TransportKind::kTcp);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().ToString().find("layers"), std::string::npos) << got.status().ToString();
}

}  // namespace
}  // namespace cohort::parallel::testing
