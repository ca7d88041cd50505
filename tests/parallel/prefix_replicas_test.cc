// The prefix cache on a distributed instance, ranks as threads: rank 0's PrefixCache keeps its
// slice and reports every block to the executor (model::KvBlockReplicas), so each worker keeps,
// writes back and evicts its own slice under the coordinator's block ids. A prefix restored on
// every rank must give the logits of computing it again, eviction must reach the workers, and
// an operation on a block a worker does not hold must end the job with a clear error. Also the
// block operations' wire coding.
#include <algorithm>
#include <array>
#include <cmath>
#include <span>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "engine/prefix_cache.h"
#include "gguf/gguf.h"
#include "parallel/executor.h"
#include "parallel/model_plan.h"
#include "parallel/step_message.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kBlock = 16;

model::Batch Run(const std::vector<int32_t>& tokens, int begin, int end, int seq) {
  model::Batch b;
  for (int i = begin; i < end; ++i) b.Add(tokens[static_cast<size_t>(i)], i, seq, i + 1 == end);
  return b;
}

std::vector<int32_t> Prompt(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i == 0 ? 1 : (first + 7 * i) % 200 + 2);
  return t;
}

struct Outcome {
  std::vector<float> restored;  // logits after the restored prefix
  std::vector<float> fresh;     // the same tokens with the prefix computed again
  int n_restored = 0;
  int n_after_eviction = 0;     // what a restore of the first prompt got after eviction
  engine::PrefixCacheStats stats;
  std::vector<int64_t> held;    // [rank] blocks each worker held at the end (rank 0: unused)
};

// Rank 0: prompt A in seq 0, kept; B = A's first 32 positions and 8 more restored into seq 1
// and finished; the same 40 tokens computed in seq 2 as two steps (32, then 8). Then a budget
// of 3 blocks: prompt C's 2 blocks evict A's tail.
Status Coordinator(Executor& exec, const Context& ctx, Outcome* out) {
  model::KvCacheOptions o;
  o.n_ctx = 64;
  o.n_seq = 3;
  COHORT_ASSIGN_OR_RETURN(auto cache, exec.NewKvCache(o));
  engine::PrefixCache prefix(*cache, 3 * cache->RowsBytes(kBlock), kBlock);
  prefix.SetReplicas(&exec);
  const int n_vocab = exec.config().n_vocab;
  std::vector<float> logits(n_vocab);
  const std::vector<int32_t> a = Prompt(3, 40);
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(a, 0, 40, 0), *cache, logits));
  prefix.Save(a, *cache, 0);
  std::vector<int32_t> b(a.begin(), a.begin() + 32);
  for (int32_t t : Prompt(11, 8)) b.push_back(t);
  out->n_restored = prefix.Restore(b, 39, *cache, 1);
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(b, out->n_restored, 40, 1), *cache, logits));
  out->restored = logits;
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(b, 0, 32, 2), *cache, logits));
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(b, 32, 40, 2), *cache, logits));
  out->fresh = logits;
  const std::vector<int32_t> c = Prompt(5, 40);
  cache->Truncate(0, 0);
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(c, 0, 40, 0), *cache, logits));
  prefix.Save(c, *cache, 0);  // 2 blocks more than the 3 the budget holds: A's second goes
  out->n_after_eviction = prefix.Restore(a, 39, *cache, 1);
  COHORT_RETURN_IF_ERROR(exec.Forward(ctx, Run(a, out->n_after_eviction, 40, 1), *cache, logits));
  out->stats = prefix.stats();
  return Status::Ok();
}

Result<Outcome> RunRanks(const char* layout, int n_ranks, bool bad_op) {
  auto file = gguf::File::Open(FixtureModel("tiny-llama-f32"));
  COHORT_RETURN_IF_ERROR(file.status());
  COHORT_ASSIGN_OR_RETURN(plan::ShardPlan plan, PlanOfLayout(**file, layout, n_ranks));
  COHORT_ASSIGN_OR_RETURN(auto transports, comm::MakeLocalGroup(comm::TransportKind::kTcp, n_ranks));
  Outcome out;
  out.held.assign(static_cast<size_t>(n_ranks), -1);
  const std::vector<Status> statuses = comm::RunOnRanks(n_ranks, [&](int r) -> Status {
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    comm::Communicator world(std::move(transports[static_cast<size_t>(r)]));
    COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(**file));
    COHORT_ASSIGN_OR_RETURN(auto exec, Executor::Create(std::move(m), plan, world));
    if (r != 0) {
      const Status served = exec->Serve(ctx);
      out.held[static_cast<size_t>(r)] = exec->blocks_held();
      return served;
    }
    Status s;
    if (bad_op) {
      model::KvCacheOptions o;
      o.n_ctx = 64;
      COHORT_ASSIGN_OR_RETURN(auto cache, exec->NewKvCache(o));
      exec->Load(999, 0, 0);  // a block no rank was told to keep
      std::vector<float> logits(exec->config().n_vocab);
      s = exec->Forward(ctx, Run(Prompt(3, 4), 0, 4, 0), *cache, logits);
      return s.ok() ? InvalidArgument("the step with a bad block operation went through") : Status::Ok();
    }
    s = Coordinator(*exec, ctx, &out);
    const Status stop = exec->Stop();
    return s.ok() ? stop : s;
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].Annotate("rank " + std::to_string(r));
  }
  return out;
}

class PrefixReplicasTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(PrefixReplicasTest, EveryRankRestoresAndEvictsItsSlice) {
  const auto [layout, n_ranks] = GetParam();
  auto got = RunRanks(layout, n_ranks, false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->n_restored, 32);
  ASSERT_EQ(got->restored.size(), got->fresh.size());
  float diff = 0.0f;
  for (size_t i = 0; i < got->fresh.size(); ++i) diff = std::max(diff, std::abs(got->restored[i] - got->fresh[i]));
  EXPECT_LE(diff, 1e-5f) << "the restored prefix's logits differ from computing it again";
  const int n_vocab = static_cast<int>(got->fresh.size());
  EXPECT_EQ(Argmax(got->restored.data(), n_vocab), Argmax(got->fresh.data(), n_vocab));
  // A's first block is shared by nothing else but stays (C's blocks and A's first fill the 3).
  EXPECT_EQ(got->stats.blocks_evicted, 1u);
  EXPECT_EQ(got->stats.blocks, 3);
  EXPECT_EQ(got->n_after_eviction, kBlock);
  for (int r = 1; r < n_ranks; ++r) EXPECT_EQ(got->held[static_cast<size_t>(r)], got->stats.blocks) << "rank " << r;
}

INSTANTIATE_TEST_SUITE_P(Layouts, PrefixReplicasTest,
                         ::testing::Values(std::pair<const char*, int>{"tp", 2}, std::pair<const char*, int>{"pp", 2},
                                           std::pair<const char*, int>{"hybrid:2", 4}),
                         [](const auto& info) {
                           std::string name = std::string(info.param.first) + std::to_string(info.param.second);
                           name.erase(std::remove(name.begin(), name.end(), ':'), name.end());
                           return name;
                         });

TEST(PrefixReplicasErrorTest, ABlockAWorkerDoesNotHoldEndsTheJobClearly) {
  auto got = RunRanks("tp", 2, true);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().ToString().find("prefix block 999 is not held"), std::string::npos) << got.status().ToString();
}

TEST(BlockOpCodingTest, RoundTripsAndRefusesOpsOutsideTheCache) {
  model::Batch batch;
  batch.Add(5, 0, 1, true);
  const std::vector<int32_t> lengths = {0, 0};
  const std::vector<BlockOp> ops = {{BlockOpKind::kKeep, 1, 16, 16, 7},
                                    {BlockOpKind::kLoad, 0, 0, 0, 7},
                                    {BlockOpKind::kDrop, 0, 0, 0, 1ull << 40}};
  StepHeader h;
  h.n_tokens = 1;
  h.n_seq = 2;
  h.n_ctx = 32;
  h.n_block_ops = static_cast<uint32_t>(ops.size());
  std::array<std::byte, StepHeader::kBytes> head;
  h.Encode(head);
  auto back = StepHeader::Decode(head);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->n_block_ops, 3u);
  std::vector<std::byte> payload(h.PayloadBytes());
  EncodePayload(batch, lengths, ops, payload);
  StepPayload decoded;
  ASSERT_TRUE(DecodePayload(*back, payload, &decoded).ok());
  EXPECT_EQ(decoded.block_ops, ops);
  // A kept block reaching past n_ctx (16 + 17 > 32), then an unknown kind.
  const std::vector<BlockOp> beyond = {{BlockOpKind::kKeep, 1, 16, 17, 7}};
  h.n_block_ops = 1;
  payload.resize(h.PayloadBytes());
  EncodePayload(batch, lengths, beyond, payload);
  Status st = DecodePayload(h, payload, &decoded);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt) << st.ToString();
  EncodePayload(batch, lengths, std::span(ops).first(1), payload);
  const uint32_t bogus = 9;
  std::memcpy(payload.data() + 13 + 2 * 4, &bogus, 4);
  st = DecodePayload(h, payload, &decoded);
  EXPECT_EQ(st.code(), StatusCode::kCorrupt);
  EXPECT_NE(st.ToString().find("unknown block operation"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace cohort::parallel::testing
