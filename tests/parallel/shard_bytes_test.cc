// ShardByteRanges: (1) every rank run on a copy of the model that holds only its ranges (every
// other byte poisoned with 0xFF, a NaN in every float type) gives logits bit-identical to the
// same layout on the real file, so the ranges cover every byte the executor reads; (2) a
// tensor-parallel rank's ranges add up to about its share of the model.
#include "parallel/shard_bytes.h"

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/executor.h"
#include "parallel/model_plan.h"
#include "share_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kGen = 4;

TEST(ByteRanges, MergeAndCover) {
  const auto m = MergeRanges({{10, 5}, {0, 4}, {4, 2}, {12, 10}, {30, 0}, {40, 1}});
  ASSERT_EQ(m, (std::vector<ByteRange>{{0, 6}, {10, 12}, {40, 1}}));
  EXPECT_EQ(TotalBytes(m), 19u);
  EXPECT_TRUE(Covers(m, std::vector<ByteRange>{{0, 6}, {11, 11}, {40, 1}}));
  EXPECT_FALSE(Covers(m, std::vector<ByteRange>{{5, 2}}));
  EXPECT_FALSE(Covers(m, std::vector<ByteRange>{{21, 2}}));
  EXPECT_FALSE(Covers(m, std::vector<ByteRange>{{41, 1}}));
  EXPECT_NE(RangesDigest(m), RangesDigest(std::vector<ByteRange>{{0, 6}, {10, 12}}));
}

Result<plan::ShardPlan> PlanFor(const gguf::File& file, const char* layout, int n_ranks,
                          const std::vector<double>& shares = {}) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(file));
  COHORT_ASSIGN_OR_RETURN(plan::PlanShape shape, PlanShapeOf(file, config));
  COHORT_ASSIGN_OR_RETURN(plan::LayoutSpec spec, ParseLayout(layout, n_ranks, shares));
  return plan::MakePlan(shape, spec);
}

// Runs `plan` with rank r reading files[r]; the trace of rank 0.
Result<Trace> RunPlan(const plan::ShardPlan& plan, const std::vector<const gguf::File*>& files) {
  const int n = plan.n_ranks();
  COHORT_ASSIGN_OR_RETURN(auto transports, comm::MakeLocalGroup(comm::TransportKind::kTcp, n));
  Trace trace;
  const std::vector<Status> statuses = comm::RunOnRanks(n, [&](int r) -> Status {
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    comm::Communicator world(std::move(transports[r]));
    COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(*files[r]));
    COHORT_ASSIGN_OR_RETURN(auto exec, Executor::Create(std::move(m), plan, world));
    if (r != 0) return exec->Serve(ctx);
    model::KvCacheOptions o;
    o.n_ctx = 64;
    COHORT_ASSIGN_OR_RETURN(auto cache, exec->NewKvCache(o));
    Status s = RunTrace(*exec, ctx, *cache, kGen, &trace);
    const Status stop = exec->Stop();
    return s.ok() ? stop : s;
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].Annotate("rank " + std::to_string(r));
  }
  return trace;
}

struct Case {
  const char* name;
  const char* layout;
  int n_ranks;
};

class ShardBytesCoverage : public ::testing::TestWithParam<std::tuple<const char*, Case>> {};

TEST_P(ShardBytesCoverage, RanksReadNothingOutsideTheirRanges) {
  const auto& [model_name, c] = GetParam();
  const std::string path = FixtureModel(model_name);
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto plan = PlanFor(**file, c.layout, c.n_ranks);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::vector<uint8_t> original = ReadWholeFile(path);
  ASSERT_EQ(original.size(), (*file)->file_size());

  ScratchDir dir;
  std::vector<std::unique_ptr<gguf::File>> poisoned;
  std::vector<ByteRange> all;
  for (int r = 0; r < c.n_ranks; ++r) {
    auto ranges = ShardByteRanges(**file, *plan, r);
    ASSERT_TRUE(ranges.ok()) << ranges.status().ToString();
    std::vector<uint8_t> bytes(original.size(), 0xFF);
    for (const ByteRange& br : *ranges) {
      ASSERT_LE(br.end(), original.size());
      std::copy(original.begin() + br.offset, original.begin() + br.end(), bytes.begin() + br.offset);
    }
    all.insert(all.end(), ranges->begin(), ranges->end());
    const std::string p = dir.Sub("rank" + std::to_string(r) + ".gguf");
    ASSERT_TRUE(WriteWholeFile(p, bytes));
    auto f = gguf::File::Open(p);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    poisoned.push_back(std::move(*f));
  }
  // Together the ranks hold every tensor byte (each tensor is someone's share).
  for (const gguf::TensorInfo& t : (*file)->tensors()) {
    EXPECT_TRUE(Covers(MergeRanges(all), std::vector<ByteRange>{{(*file)->data_offset() + t.offset, t.n_bytes}}))
        << t.name;
  }
  std::vector<const gguf::File*> real(c.n_ranks, file->get()), shares;
  for (const auto& f : poisoned) shares.push_back(f.get());
  auto want = RunPlan(*plan, real);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  auto got = RunPlan(*plan, shares);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameTrace(*got, *want, 0.0f);
}

const Case kCases[] = {{"tp3", "tp", 3}, {"pp2", "pp", 2}, {"hybrid2x2", "hybrid:2", 4}};

INSTANTIATE_TEST_SUITE_P(
    Fixtures, ShardBytesCoverage,
    ::testing::Combine(::testing::Values("tiny-llama-f32", "tiny-qwen2-f32", "tiny-qwen3-f32",
                                         "tiny-qwen3moe-f32", "tiny-deepseek2-f32",
                                         "tiny-llama-q4_0", "tiny-qwen3-q8_0"),
                       ::testing::ValuesIn(kCases)),
    [](const auto& info) {
      std::string name = std::string(std::get<0>(info.param)) + "_" + std::get<1>(info.param).name;
      for (char& ch : name) {
        if (ch == '-') ch = '_';
      }
      return name;
    });

// K-quant and IQ2_XS/IQ2_S blocks (256 values) are as wide as the fixtures' attention: whole
// layers only.
INSTANTIATE_TEST_SUITE_P(KQuants, ShardBytesCoverage,
                         ::testing::Combine(::testing::Values("tiny-llama-q4_k_m", "tiny-qwen3-q6_k",
                                                              "tiny-llama-iq2_xs", "tiny-llama-iq2_s"),
                                            ::testing::Values(Case{"pp2", "pp", 2})),
                         [](const auto& info) {
                           std::string name = std::string(std::get<0>(info.param)) + "_pp2";
                           for (char& ch : name) {
                             if (ch == '-') ch = '_';
                           }
                           return name;
                         });

// Bytes every tensor-parallel rank holds whole by design: vectors (norms, biases), MoE routers,
// and K/V projections when ranks outnumber KV heads (each rank keeps its KV head).
uint64_t ReplicatedBytes(const gguf::File& file, int n_ranks, int n_head_kv) {
  uint64_t n = 0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const bool kv = t.name.ends_with("attn_k.weight") || t.name.ends_with("attn_v.weight");
    if (t.n_rows() == 1 || t.name.ends_with("ffn_gate_inp.weight") || (kv && n_ranks > n_head_kv)) {
      n += t.n_bytes;
    }
  }
  return n;
}

TEST(ShardBytesSize, TensorParallelRanksHoldAboutTheirShare) {
  for (const char* name : {"tiny-llama-f32", "tiny-qwen3-f32", "tiny-qwen3moe-f32", "tiny-llama-q4_0",
                           "tiny-qwen3-q8_0"}) {
    auto file = gguf::File::Open(FixtureModel(name));
    ASSERT_TRUE(file.ok());
    auto config = model::ModelConfig::FromGguf(**file);
    ASSERT_TRUE(config.ok());
    const uint64_t data = (*file)->file_size() - (*file)->data_offset();
    for (int n : {2, 4}) {
      auto plan = PlanFor(**file, "tp", n);
      ASSERT_TRUE(plan.ok()) << plan.status().ToString();
      const uint64_t allowance = (*file)->data_offset() + ReplicatedBytes(**file, n, config->n_head_kv);
      for (int r = 0; r < n; ++r) {
        auto ranges = ShardByteRanges(**file, *plan, r);
        ASSERT_TRUE(ranges.ok());
        const uint64_t held = TotalBytes(*ranges);
        EXPECT_LE(held, 1.1 * data / n + allowance) << name << " tp" << n << " rank " << r;
        EXPECT_GE(held, 0.9 * data / n) << name << " tp" << n << " rank " << r;
      }
    }
  }
}

TEST(ShardBytesSize, PipelineStagesHoldTheirLayers) {
  auto file = gguf::File::Open(FixtureModel("tiny-deepseek2-f32"));
  ASSERT_TRUE(file.ok());
  auto plan = PlanFor(**file, "pp", 3);
  ASSERT_TRUE(plan.ok());
  for (int r = 0; r < 3; ++r) {
    auto ranges = ShardByteRanges(**file, *plan, r);
    ASSERT_TRUE(ranges.ok());
    for (const gguf::TensorInfo& t : (*file)->tensors()) {
      const ByteRange tr{(*file)->data_offset() + t.offset, t.n_bytes};
      if (t.name.starts_with("blk.")) {
        const bool mine = t.name.starts_with("blk." + std::to_string(r) + ".");
        EXPECT_EQ(Covers(*ranges, std::vector<ByteRange>{tr}), mine) << "rank " << r << " " << t.name;
      }
    }
  }
}

}  // namespace
}  // namespace cohort::parallel::testing
