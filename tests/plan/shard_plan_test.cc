// ShardPlan: construction for every rank count and layout, KV replication, uneven shares,
// validation of broken plans, and the JSON round trip.
#include "plan/shard_plan.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace cohort::plan {
namespace {

// Llama-3.1-70B: 80 layers, 64 query heads over 8 KV heads, dense FFN 28672.
PlanShape Llama70B() {
  PlanShape s;
  s.n_layer = 80;
  s.n_embd = 8192;
  s.n_head = 64;
  s.n_head_kv = 8;
  s.head_dim = 128;
  s.n_ff = 28672;
  s.n_vocab = 128256;
  return s;
}

// Qwen3-235B-A22B: 94 layers, 64 query heads over 4 KV heads, 128 experts of width 1536.
PlanShape Qwen235B() {
  PlanShape s;
  s.n_layer = 94;
  s.n_embd = 4096;
  s.n_head = 64;
  s.n_head_kv = 4;
  s.head_dim = 128;
  s.n_expert = 128;
  s.n_ff_expert = 1536;
  s.n_vocab = 151936;
  return s;
}

std::vector<int> Sizes(const StagePlan& stage, Range RankShard::*field) {
  std::vector<int> out;
  for (const RankShard& r : stage.ranks) out.push_back((r.*field).size());
  return out;
}

TEST(Apportion, LargestRemainderWithMinimum) {
  EXPECT_EQ(*Apportion(10, {1, 1, 1}, 1), (std::vector<int>{4, 3, 3}));
  EXPECT_EQ(*Apportion(8, {2, 1, 1}, 1), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(*Apportion(7, {2, 1, 1}, 1), (std::vector<int>{3, 2, 2}));
  // The minimum wins over the proportion: 100:1:1 of 3 units is 1 each.
  EXPECT_EQ(*Apportion(3, {100, 1, 1}, 1), (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(*Apportion(5, {100, 1, 1}, 1), (std::vector<int>{3, 1, 1}));
  EXPECT_FALSE(Apportion(2, {1, 1, 1}, 1).ok());
  EXPECT_FALSE(Apportion(5, {1, 0}, 1).ok());
  EXPECT_FALSE(Apportion(5, {}, 1).ok());
}

TEST(ShardPlan, TensorParallelOneToSixRanks) {
  for (const PlanShape& shape : {Llama70B(), Qwen235B()}) {
    for (int n = 1; n <= 6; ++n) {
      SCOPED_TRACE("ranks " + std::to_string(n) + " experts " + std::to_string(shape.n_expert));
      auto plan = MakePlan(shape, LayoutSpec::Tensor(n));
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      ASSERT_TRUE(plan->Validate().ok());
      ASSERT_EQ(plan->n_ranks(), n);
      ASSERT_EQ(plan->n_stages(), 1);
      const StagePlan& st = plan->stages[0];
      EXPECT_EQ(st.layers, (Range{0, shape.n_layer}));
      auto q = Sizes(st, &RankShard::q_heads);
      EXPECT_EQ(std::accumulate(q.begin(), q.end(), 0), shape.n_head);
      auto vocab = Sizes(st, &RankShard::output_rows);
      EXPECT_EQ(std::accumulate(vocab.begin(), vocab.end(), 0), shape.n_vocab);
      for (const RankShard& r : st.ranks) {
        EXPECT_EQ(r.embd_rows, r.output_rows);  // one stage holds both ends
        if (shape.n_ff > 0) {
          EXPECT_EQ(r.ff_cols.begin % shape.block, 0);
          // Even weights: every slice within one block of the ideal share.
          EXPECT_NEAR(r.ff_cols.size(), shape.n_ff / n, shape.block);
        }
        if (shape.n_expert > 0) {
          EXPECT_EQ(r.experts, (Range{0, shape.n_expert}));
          EXPECT_EQ(r.expert_cols.begin % shape.block, 0);
        }
      }
    }
  }
}

TEST(ShardPlan, UnevenSharesFollowWeights) {
  auto plan = MakePlan(Llama70B(), LayoutSpec::TensorWeighted({2, 1, 1}));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const StagePlan& st = plan->stages[0];
  EXPECT_EQ(Sizes(st, &RankShard::kv_heads), (std::vector<int>{4, 2, 2}));
  EXPECT_EQ(Sizes(st, &RankShard::q_heads), (std::vector<int>{32, 16, 16}));
  EXPECT_EQ(Sizes(st, &RankShard::ff_cols), (std::vector<int>{14336, 7168, 7168}));
  EXPECT_EQ(Sizes(st, &RankShard::output_rows), (std::vector<int>{64128, 32064, 32064}));
  EXPECT_EQ(st.ranks[1].ff_cols, (Range{14336, 21504}));

  // Five ranks, 3:1:1:1:1 - not a divisor of anything.
  auto five = MakePlan(Llama70B(), LayoutSpec::TensorWeighted({3, 1, 1, 1, 1}));
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  EXPECT_EQ(Sizes(five->stages[0], &RankShard::kv_heads), (std::vector<int>{4, 1, 1, 1, 1}));
  auto ff = Sizes(five->stages[0], &RankShard::ff_cols);
  EXPECT_EQ(std::accumulate(ff.begin(), ff.end(), 0), 28672);
  EXPECT_NEAR(ff[0], 28672 * 3 / 7, 32);
  EXPECT_NEAR(ff[4], 28672 / 7, 32);
}

TEST(ShardPlan, KvHeadsReplicatedWhenRanksOutnumberThem) {
  // Qwen3-235B has 4 KV heads; 6 equal ranks are dealt 1,2,1,2 to them by weight midpoints.
  auto plan = MakePlan(Qwen235B(), LayoutSpec::Tensor(6));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const StagePlan& st = plan->stages[0];
  std::vector<int> kv_of;
  for (const RankShard& r : st.ranks) {
    ASSERT_EQ(r.kv_heads.size(), 1);
    kv_of.push_back(r.kv_heads.begin);
    EXPECT_GE(r.q_heads.begin, r.kv_heads.begin * 16);
    EXPECT_LE(r.q_heads.end, r.kv_heads.end * 16);
  }
  EXPECT_EQ(kv_of, (std::vector<int>{0, 1, 1, 2, 3, 3}));
  EXPECT_EQ(Sizes(st, &RankShard::q_heads), (std::vector<int>{16, 8, 8, 16, 8, 8}));

  // Multi-query attention: one KV head held by all three ranks, queries split 2:1:1.
  PlanShape mqa = Llama70B();
  mqa.n_head = 8;
  mqa.n_head_kv = 1;
  mqa.head_dim = 0;
  auto m = MakePlan(mqa, LayoutSpec::TensorWeighted({2, 1, 1}));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const RankShard& r : m->stages[0].ranks) EXPECT_EQ(r.kv_heads, (Range{0, 1}));
  EXPECT_EQ(Sizes(m->stages[0], &RankShard::q_heads), (std::vector<int>{4, 2, 2}));

  // A heavy last rank would leave a KV head without ranks by midpoints: fall back to even runs.
  PlanShape four = Llama70B();
  four.n_head_kv = 4;
  auto heavy = MakePlan(four, LayoutSpec::TensorWeighted({1, 1, 1, 1, 10}));
  ASSERT_TRUE(heavy.ok()) << heavy.status().ToString();
  std::vector<int> heavy_kv;
  for (const RankShard& r : heavy->stages[0].ranks) heavy_kv.push_back(r.kv_heads.begin);
  EXPECT_EQ(heavy_kv, (std::vector<int>{0, 0, 1, 2, 3}));
}

TEST(ShardPlan, HybridTwoByTwoAndPipeline) {
  auto plan = MakePlan(Llama70B(), LayoutSpec::Hybrid(2, 2));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->n_stages(), 2);
  EXPECT_EQ(plan->stages[0].layers, (Range{0, 40}));
  EXPECT_EQ(plan->stages[1].layers, (Range{40, 80}));
  EXPECT_EQ(plan->stages[1].ranks[0].rank, 2);
  EXPECT_EQ(plan->StageOf(3), 1);
  EXPECT_EQ(plan->Rank(3).q_heads, (Range{32, 64}));
  for (const RankShard& r : plan->stages[0].ranks) {
    EXPECT_FALSE(r.embd_rows.empty());
    EXPECT_TRUE(r.output_rows.empty());
  }
  for (const RankShard& r : plan->stages[1].ranks) {
    EXPECT_TRUE(r.embd_rows.empty());
    EXPECT_FALSE(r.output_rows.empty());
  }

  auto pp = MakePlan(Qwen235B(), LayoutSpec::PipelineWeighted({2, 1, 1}));
  ASSERT_TRUE(pp.ok()) << pp.status().ToString();
  EXPECT_EQ(pp->stages[0].layers, (Range{0, 47}));
  EXPECT_EQ(pp->stages[1].layers, (Range{47, 71}));
  EXPECT_EQ(pp->stages[2].layers, (Range{71, 94}));
  EXPECT_EQ(pp->stages[1].ranks[0].q_heads, (Range{0, 64}));  // one rank per stage: all heads
}

TEST(ShardPlan, HeadSplitsFollowQuantBlocks) {
  // Kimi K2-like MLA: 64 heads of 128 columns, Q4_K blocks of 256: heads go in pairs.
  PlanShape mla = Qwen235B();
  mla.n_head_kv = 64;
  mla.block = 256;
  auto plan = MakePlan(mla, LayoutSpec::Tensor(3));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Sizes(plan->stages[0], &RankShard::q_heads), (std::vector<int>{22, 22, 20}));
  // Twelve ranks on 4 KV heads: each KV head's 16 queries split 6,6,4 (pairs), not 6,5,5.
  PlanShape gqa = Llama70B();
  gqa.n_head_kv = 4;
  gqa.block = 256;
  auto twelve = MakePlan(gqa, LayoutSpec::Tensor(12));
  ASSERT_TRUE(twelve.ok()) << twelve.status().ToString();
  EXPECT_EQ(Sizes(twelve->stages[0], &RankShard::q_heads),
            (std::vector<int>{6, 6, 4, 6, 6, 4, 6, 6, 4, 6, 6, 4}));
  // With 32-wide blocks single heads are fine: 6,5,5.
  gqa.block = 32;
  auto fine = MakePlan(gqa, LayoutSpec::Tensor(12));
  ASSERT_TRUE(fine.ok());
  EXPECT_EQ(Sizes(fine->stages[0], &RankShard::q_heads)[1], 5);
}

TEST(ShardPlan, WholeExperts) {
  LayoutSpec spec = LayoutSpec::TensorWeighted({1, 1, 1});
  spec.expert_split = ExpertSplit::kWhole;
  auto plan = MakePlan(Qwen235B(), spec);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Sizes(plan->stages[0], &RankShard::experts), (std::vector<int>{43, 43, 42}));
  for (const RankShard& r : plan->stages[0].ranks) EXPECT_EQ(r.expert_cols, (Range{0, 1536}));
}

TEST(ShardPlan, InvalidSpecsGiveClearStatus) {
  auto expect_error = [](const PlanShape& shape, const LayoutSpec& spec, const std::string& text) {
    auto plan = MakePlan(shape, spec);
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(plan.status().message().find(text), std::string::npos) << plan.status().ToString();
  };
  expect_error(Llama70B(), LayoutSpec{}, "no stages");
  expect_error(Llama70B(), LayoutSpec::TensorWeighted({1, 0}), "positive");
  expect_error(Llama70B(), LayoutSpec::Tensor(65), "query heads");
  expect_error(Llama70B(), LayoutSpec::Pipeline(81), "layers");
  PlanShape small = Llama70B();
  small.n_ff = 64;
  expect_error(small, LayoutSpec::Tensor(3), "dense FFN");
  // Q4_K blocks of 256 columns cannot start an attention slice at head 1 (column 128).
  // Five ranks on one KV head of 8 queries with 256-wide blocks: pairs of heads would be
  // aligned, but 4 pairs cannot serve 5 ranks, and head 7 starts at column 896.
  PlanShape kquant = Llama70B();
  kquant.n_head = 8;
  kquant.n_head_kv = 1;
  kquant.block = 256;
  expect_error(kquant, LayoutSpec::Tensor(5), "quant block 256");
  PlanShape bad = Llama70B();
  bad.n_head_kv = 7;
  expect_error(bad, LayoutSpec::Tensor(2), "multiple of n_head_kv");
}

TEST(ShardPlan, ValidateCatchesBrokenPlans) {
  auto plan = MakePlan(Llama70B(), LayoutSpec::Tensor(3));
  ASSERT_TRUE(plan.ok());
  ShardPlan overlap = *plan;
  overlap.stages[0].ranks[1].q_heads.begin -= 8;
  overlap.stages[0].ranks[1].kv_heads.begin -= 1;
  EXPECT_FALSE(overlap.Validate().ok());
  ShardPlan missing_row = *plan;
  missing_row.stages[0].ranks[2].output_rows.end -= 1;
  EXPECT_NE(missing_row.Validate().message().find("output rows"), std::string::npos);
  ShardPlan wrong_kv = *plan;
  wrong_kv.stages[0].ranks[0].kv_heads = {0, 8};
  EXPECT_NE(wrong_kv.Validate().message().find("need KV heads"), std::string::npos);
  ShardPlan misaligned = *plan;
  misaligned.stages[0].ranks[0].ff_cols.end += 1;
  misaligned.stages[0].ranks[1].ff_cols.begin += 1;
  EXPECT_NE(misaligned.Validate().message().find("quant block"), std::string::npos);
}

TEST(ShardPlan, JsonRoundTrip) {
  LayoutSpec whole = LayoutSpec::Hybrid(2, 3);
  whole.expert_split = ExpertSplit::kWhole;
  std::vector<std::pair<PlanShape, LayoutSpec>> cases = {
      {Llama70B(), LayoutSpec::TensorWeighted({2, 1, 1})},
      {Llama70B(), LayoutSpec::Hybrid(2, 2)},
      {Qwen235B(), LayoutSpec::Tensor(6)},
      {Qwen235B(), whole},
  };
  for (const auto& [shape, spec] : cases) {
    auto plan = MakePlan(shape, spec);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const std::string json = plan->ToJson();
    auto back = ShardPlan::FromJson(json);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->ToJson(), json);
    EXPECT_EQ(back->stages, plan->stages);
    EXPECT_EQ(back->expert_split, plan->expert_split);
    EXPECT_FALSE(plan->ToString().empty());
  }
  EXPECT_EQ(ShardPlan::FromJson("{").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(ShardPlan::FromJson("[]").status().code(), StatusCode::kCorrupt);
  auto plan = MakePlan(Llama70B(), LayoutSpec::Tensor(2));
  std::string json = plan->ToJson();
  const std::string from = "\"version\": 1";
  ASSERT_NE(json.find(from), std::string::npos);
  EXPECT_EQ(ShardPlan::FromJson(std::string(json).replace(json.find(from), from.size(),
                                                          "\"version\": 9"))
                .status()
                .code(),
            StatusCode::kUnsupported);
  // A structurally fine document that breaks ownership is rejected by Validate.
  const std::string layers = "\"layers\": [\n        0,\n        80\n      ]";
  ASSERT_NE(json.find(layers), std::string::npos) << json.substr(0, 600);
  std::string broken = json;
  broken.replace(broken.find(layers), layers.size(), "\"layers\": [0, 79]");
  auto bad = ShardPlan::FromJson(broken);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::plan
