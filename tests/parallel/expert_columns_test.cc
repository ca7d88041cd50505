// "N ranks equal 1 rank" for routed experts split by columns (plan::ExpertSplit::kColumns):
// every rank holds a column share of every expert, routes alike and sums its partial expert
// outputs in the FFN all-reduce. The MoE fixtures over 2-4 ranks (threads over the comm
// layer's shared-memory and loopback TCP groups) must give the single-process logits within
// executor_test's tensor-parallel tolerance and the same greedy ids.
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/decoder.h"
#include "parallel/executor.h"
#include "parallel/model_plan.h"
#include "rank_threads.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kGen = 8;

struct ColumnLayout {
  const char* name;
  int n_stages;
  std::vector<double> rank_weights;  // of each stage's ranks
};

// Names the layout in gtest's messages (instead of its bytes).
void PrintTo(const ColumnLayout& l, std::ostream* os) { *os << l.name; }

Result<plan::ShardPlan> ColumnPlan(const gguf::File& file, const ColumnLayout& l) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(file));
  COHORT_ASSIGN_OR_RETURN(plan::PlanShape shape, PlanShapeOf(file, config));
  plan::LayoutSpec spec;
  spec.stage_rank_weights.assign(l.n_stages, l.rank_weights);
  spec.expert_split = plan::ExpertSplit::kColumns;
  COHORT_RETURN_IF_ERROR(spec.Validate());
  return plan::MakePlan(shape, spec);
}


Trace SingleRank(const gguf::File& file) { return SingleRankTrace(file, kGen); }

Result<Trace> Distributed(const gguf::File& file, const plan::ShardPlan& plan, comm::TransportKind kind) {
  return RanksAsThreadsTrace(file, plan, kind, kGen);
}

class ExpertColumnsTest : public ::testing::TestWithParam<std::tuple<const char*, ColumnLayout>> {};

TEST_P(ExpertColumnsTest, NRanksEqualOneRank) {
  const auto& [model_name, layout] = GetParam();
  auto file = gguf::File::Open(FixtureModel(model_name));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto plan = ColumnPlan(**file, layout);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  // The plan really splits columns: every rank of a multi-rank stage holds all experts and a
  // strict share of their columns, and its stage shard says so.
  for (const plan::StagePlan& stage : plan->stages) {
    for (const plan::RankShard& r : stage.ranks) {
      EXPECT_EQ(r.experts, (plan::Range{0, plan->shape.n_expert}));
      if (stage.ranks.size() > 1) {
        EXPECT_LT(r.expert_cols.end - r.expert_cols.begin, plan->shape.n_ff_expert);
      }
      auto shard = StageShardOf(*plan, r.rank);
      ASSERT_TRUE(shard.ok()) << shard.status().ToString();
      EXPECT_EQ(shard->layer.expert_cols.begin, r.expert_cols.begin);
      EXPECT_EQ(shard->layer.expert_cols.end, r.expert_cols.end);
      EXPECT_EQ(shard->layer.experts.end - shard->layer.experts.begin, plan->shape.n_expert);
    }
  }
  const Trace want = SingleRank(**file);
  // Shared memory for one stage, TCP across stages: both transports carry the reductions.
  const comm::TransportKind kind = layout.n_stages == 1 ? comm::TransportKind::kShm : comm::TransportKind::kTcp;
  auto got = Distributed(**file, *plan, kind);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameTrace(*got, want, 1e-4f);  // executor_test's tensor-parallel tolerance
}

const ColumnLayout kLayouts[] = {
    {"tp2", 1, {1, 1}},
    {"tp3", 1, {1, 1, 1}},
    {"tp_uneven_211", 1, {2, 1, 1}},
    {"hybrid2x2", 2, {1, 1}},
};

INSTANTIATE_TEST_SUITE_P(
    MoeFixtures, ExpertColumnsTest,
    ::testing::Combine(::testing::Values("tiny-qwen3moe-f32", "tiny-deepseek2-f32"),
                       ::testing::ValuesIn(kLayouts)),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// Whole experts and column shares do not combine in one shard: a rank holds either a subset
// of the experts with all their columns, or all experts with a subset of their columns.
TEST(ExpertColumnsShardTest, SplittingExpertsAndColumnsAtOnceIsRejected) {
  auto file = gguf::File::Open(FixtureModel("tiny-qwen3moe-f32"));
  ASSERT_TRUE(file.ok());
  auto m = model::Model::Load(**file);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto* decoder = dynamic_cast<model::Decoder*>(m->get());
  ASSERT_NE(decoder, nullptr);
  const model::ModelConfig& c = decoder->config();
  model::StageShard shard{model::FullShard(c), 0, c.n_layer};
  shard.layer.experts = {0, c.moe.n_expert / 2};
  shard.layer.expert_cols = {0, c.moe.n_ff_expert / 2};
  const Status both = decoder->SetStageShard(shard);
  EXPECT_FALSE(both.ok());
  EXPECT_NE(both.ToString().find("not both"), std::string::npos) << both.ToString();
  shard.layer.expert_cols = {0, c.moe.n_ff_expert + 1};
  shard.layer.experts = {0, c.moe.n_expert};
  EXPECT_FALSE(decoder->SetStageShard(shard).ok()) << "columns beyond the experts'";
  shard.layer.expert_cols = {0, c.moe.n_ff_expert / 2};
  EXPECT_TRUE(decoder->SetStageShard(shard).ok());
}

}  // namespace
}  // namespace cohort::parallel::testing
