// Tensor-parallel splits of the ternary types (TQ1_0, TQ2_0: 256-value blocks). PlanShapeOf
// reads the block from the file's types, so the tiny fixtures (4 heads of 64: no head split
// falls on a 256-value boundary of attn_output) are refused with the reason rather than sliced
// inside a block; on a one-layer model of Llama 3.2 1B's shape in TQ1_0 / TQ2_0 (cohort synth
// --pure) every rank's FFN columns and attention slice are whole blocks, and 2 and 3 ranks
// (threads over shared memory) give the single-process logits within a quantized tolerance
// and the same greedy ids.
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/synth.h"
#include "parallel/model_plan.h"
#include "rank_threads.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kGen = 8;

Result<plan::PlanShape> ShapeOf(const gguf::File& file) {
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(file));
  return PlanShapeOf(file, config);
}

TEST(TernarySplit, FixturesWithoutABlockAlignedHeadSplitAreRefusedWithTheReason) {
  for (const char* name : {"tiny-llama-tq1_0", "tiny-llama-tq2_0"}) {
    SCOPED_TRACE(name);
    auto file = gguf::File::Open(FixtureModel(name));
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    auto shape = ShapeOf(**file);
    ASSERT_TRUE(shape.ok()) << shape.status().ToString();
    EXPECT_EQ(shape->block, 256);
    auto plan = PlanOfLayout(**file, "tp", 2, {});
    ASSERT_FALSE(plan.ok());
    EXPECT_NE(plan.status().ToString().find("not a multiple of the quant block 256"), std::string::npos)
        << plan.status().ToString();
  }
}

// A one-layer Llama 3.2 1B (32 heads of 64 over 8 KV heads, FFN 8192) with the 512-token
// vocabulary of the fixtures, every matrix in the type; removed with the test.
class SynthesizedModel {
 public:
  explicit SynthesizedModel(const std::string& type)
      : dir_(std::filesystem::temp_directory_path() /
             ("cohort-ternary-split-" + type + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(dir_);
    model::SynthOptions o;
    o.shape = "llama-3.2-1b";
    o.type = type;
    o.pure = true;
    o.n_layer_override = 1;
    o.vocab_file = FixtureModel("tiny-llama-f32");
    o.output = (dir_ / "model.gguf").string();
    ThreadPool pool(2);
    status_ = model::Synthesize(o, &pool);
    if (status_.ok()) {
      auto file = gguf::File::Open(o.output);
      status_ = file.status();
      if (file.ok()) file_ = std::move(*file);
    }
  }
  ~SynthesizedModel() {
    file_.reset();
    std::filesystem::remove_all(dir_);
  }
  const Status& status() const { return status_; }
  const gguf::File& file() const { return *file_; }

 private:
  std::filesystem::path dir_;
  Status status_;
  std::unique_ptr<gguf::File> file_;
};

struct Layout {
  const char* name;
  int n_ranks;
  std::vector<double> shares;
};

class TernarySplitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TernarySplitTest, SharesAreWholeBlocksAndNRanksEqualOneRank) {
  SynthesizedModel m(GetParam());
  ASSERT_TRUE(m.status().ok()) << m.status().ToString();
  const gguf::TensorInfo* down = m.file().FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(DTypeName(down->type), GetParam());
  auto shape = ShapeOf(m.file());
  ASSERT_TRUE(shape.ok()) << shape.status().ToString();
  EXPECT_EQ(shape->block, 256);
  const Trace want = SingleRankTrace(m.file(), kGen);
  // A rank's partial sums, all-reduced, reorder float additions, and the next matrix's Q8_K
  // quantization of its input can turn such a last-bit difference into a whole step: over
  // ranks a quantized model is held to a quantized tolerance (the same model measures 0.0098
  // at tp2 in TQ1_0 and TQ2_0, 0.0105 in Q4_K, 0.018 in Q8_0; under 1e-4 in F32), with the same
  // greedy ids.
  constexpr float kTol = 0.05f;
  const Layout kLayouts[] = {{"tp2", 2, {}}, {"tp3", 3, {}}, {"tp_uneven_31", 2, {3, 1}}};
  for (const Layout& layout : kLayouts) {
    SCOPED_TRACE(layout.name);
    auto plan = PlanOfLayout(m.file(), "tp", layout.n_ranks, layout.shares);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_EQ(plan->stages.size(), 1u);
    for (const plan::RankShard& r : plan->stages[0].ranks) {
      SCOPED_TRACE(::testing::Message() << "rank " << r.rank);
      EXPECT_EQ(r.ff_cols.begin % 256, 0);
      EXPECT_EQ(r.ff_cols.end % 256, 0);
      EXPECT_GT(r.ff_cols.end, r.ff_cols.begin);
      EXPECT_EQ((r.q_heads.begin * shape->head_dim) % 256, 0);
    }
    auto got = RanksAsThreadsTrace(m.file(), *plan, comm::TransportKind::kShm, kGen);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameTrace(*got, want, kTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Types, TernarySplitTest, ::testing::Values("tq1_0", "tq2_0"),
                         [](const auto& info) { return std::string(info.param); });

}  // namespace
}  // namespace cohort::parallel::testing
