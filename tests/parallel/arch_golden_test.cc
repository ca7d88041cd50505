// llama.cpp's logits for the architectures that have no tiny fixture of their own: glm4moe
// (partial RoPE, q/k/v biases, a leading dense layer, sigmoid routing with selection bias,
// renormalised and scaled weights, a shared expert, an MTP block in the file that is never
// run), minimax-m2 (q/k RMSNorm over all heads at once, partial RoPE, sigmoid routing with
// selection bias), Qwen3.5 (gated DeltaNet layers with their recurrent state, split by key
// heads over tensor-parallel ranks, then gated full attention; dense and MoE) and gpt-oss
// (sinks, a sliding window the prompt crosses, biases, MXFP4 experts). `cohort synth` is
// deterministic, so the test rebuilds the models tools/make-synth-goldens.sh gave llama.cpp
// (with the fixtures' 512-token vocabulary) and feeds them as llama.cpp was fed: the prompt as
// one batch, then llama.cpp's 32 greedy tokens one at a time. Every row must be within the
// fixtures' tolerances of llama.cpp's, and every row's argmax must be llama.cpp's next greedy
// token, in one process and over 2, 3 and 4 ranks (tensor, pipeline and hybrid layouts, and
// tensor with the experts split by columns; ranks as threads).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "comm/local_group.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/config.h"
#include "model/synth.h"
#include "plan/gguf_shape.h"
#include "plan/model_shape.h"
#include "parallel/executor.h"
#include "parallel/model_plan.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

const std::string kGolden = std::string(COHORT_TEST_DATA) + "/synth-golden";

struct ArchGolden {
  std::string shape, type;
  int layers = 0;  // > 0: the shape cut to this many layers, every matrix in `type` (--pure)
  std::vector<int32_t> prompt, greedy;
  std::vector<float> logits;  // [prompt + greedy][n_vocab]
};

ArchGolden LoadArchGolden(const std::string& name) {
  ArchGolden g;
  std::ifstream in(kGolden + "/" + name + ".json");
  EXPECT_TRUE(in.good()) << name;
  if (!in.good()) return g;
  const nlohmann::json j = nlohmann::json::parse(in);
  g.shape = j.at("shape").get<std::string>();
  g.type = j.at("type").get<std::string>();
  g.layers = j.value("layers", 0);
  g.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  g.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  std::ifstream f(kGolden + "/" + name + ".logits.f32", std::ios::binary | std::ios::ate);
  EXPECT_TRUE(f.good()) << name;
  g.logits.resize(static_cast<size_t>(f.tellg()) / sizeof(float));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(g.logits.data()), static_cast<std::streamsize>(g.logits.size() * sizeof(float)));
  return g;
}

// The prompt as one batch wanting every row, then each golden greedy token alone.
Status TeacherForced(model::Model& m, const Context& ctx, const ArchGolden& g, std::vector<float>* out) {
  const int n_vocab = m.config().n_vocab;
  model::KvCacheOptions o;
  o.n_ctx = 64;
  COHORT_ASSIGN_OR_RETURN(auto cache, m.NewKvCache(o));
  model::Batch b;
  for (size_t i = 0; i < g.prompt.size(); ++i) b.Add(g.prompt[i], static_cast<int>(i), 0, true);
  out->assign(g.prompt.size() * n_vocab, 0.0f);
  COHORT_RETURN_IF_ERROR(m.Forward(ctx, b, *cache, *out));
  std::vector<float> row(n_vocab);
  for (size_t k = 0; k < g.greedy.size(); ++k) {
    b.Clear();
    b.Add(g.greedy[k], static_cast<int>(g.prompt.size() + k), 0, true);
    COHORT_RETURN_IF_ERROR(m.Forward(ctx, b, *cache, row));
    out->insert(out->end(), row.begin(), row.end());
  }
  return Status::Ok();
}

Result<std::vector<float>> OneProcess(const gguf::File& file, const ArchGolden& g) {
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(file));
  std::vector<float> out;
  COHORT_RETURN_IF_ERROR(TeacherForced(*m, ctx, g, &out));
  return out;
}

Result<std::vector<float>> RanksAsThreads(const gguf::File& file, const plan::ShardPlan& plan,
                                          comm::TransportKind kind, const ArchGolden& g) {
  const int n_ranks = plan.n_ranks();
  COHORT_ASSIGN_OR_RETURN(auto transports, comm::MakeLocalGroup(kind, n_ranks));
  std::vector<float> out;
  const std::vector<Status> statuses = comm::RunOnRanks(n_ranks, [&](int r) -> Status {
    ThreadPool pool(1);
    Context ctx{&pool, nullptr};
    comm::Communicator world(std::move(transports[r]));
    COHORT_ASSIGN_OR_RETURN(auto m, model::Model::Load(file));
    COHORT_ASSIGN_OR_RETURN(auto exec, Executor::Create(std::move(m), plan, world));
    if (r != 0) return exec->Serve(ctx);
    Status s = TeacherForced(*exec, ctx, g, &out);
    const Status stop = exec->Stop();
    return s.ok() ? stop : s;
  });
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].ok()) return statuses[r].Annotate("rank " + std::to_string(r));
  }
  return out;
}

// F32: the fixtures' criterion (tests/model/golden_test.cc), within 1e-4 everywhere and every
// row's argmax llama.cpp's (the next greedy token). Quantized: the rows are llama.cpp's to the
// bit at first (Q8_0: glm's rows 0-2, minimax's 0-14 of the prompt batch), then differ from
// one position on, fed token by token too (cause not yet found; suspected: attention summing
// in another order than ggml's for these head shapes, 128 wide in groups of 3; the F32
// models differ from llama.cpp by ~6e-7 from row 0, as F32 matmuls do), after which an activation's
// quantization may round the other way: judged by the golden test's criterion for batch
// shapes llama.cpp did not take (at most 0.3 off, >= 90% of the argmaxes llama.cpp's), in one
// process and over ranks. gpt-oss's MXFP4 experts meet the F32 criterion (as llama.cpp's
// repacked order, every row within 1e-6 of it). Qwen3.5's MoE at Q8_0 (recurrent): its first
// rows are llama.cpp's to the bit too, then differ by ~0.06 from row 2 of the prompt batch on
// in one process already, and its DeltaNet state carries each such difference into every
// later row, so that over 48 rows the largest difference reaches 0.46 (one process, 0.44-0.47
// over ranks) where the 12-row golden of tests/apps/synth_golden_test.cc stays under 0.1: the
// first row within 1e-4, every row within 0.5 and >= 90% of the argmaxes llama.cpp's.
enum class Criterion { kF32, kQuantized, kRecurrentQuantized };

Criterion CriterionOf(const ArchGolden& g) {
  if (g.type == "f32" || g.type == "mxfp4") return Criterion::kF32;
  return g.shape.rfind("qwen3.5", 0) == 0 ? Criterion::kRecurrentQuantized : Criterion::kQuantized;
}

void ExpectMatches(const std::vector<float>& got, const ArchGolden& g, const std::string& what) {
  const Criterion criterion = CriterionOf(g);
  const bool quantized = criterion != Criterion::kF32;
  const size_t rows = g.prompt.size() + g.greedy.size();
  ASSERT_EQ(got.size(), g.logits.size()) << what;
  ASSERT_EQ(got.size() % rows, 0u);
  const size_t n_vocab = got.size() / rows;
  float max_abs = 0.0f, first_row = 0.0f;
  size_t within = 0, argmax_ok = 0;
  for (size_t r = 0; r < rows; ++r) {
    float row_max = 0.0f;
    size_t best = 0;
    for (size_t v = 0; v < n_vocab; ++v) {
      const float d = std::fabs(got[r * n_vocab + v] - g.logits[r * n_vocab + v]);
      row_max = std::isnan(d) ? INFINITY : std::max(row_max, d);
      if (got[r * n_vocab + v] > got[r * n_vocab + best]) best = v;
    }
    max_abs = std::max(max_abs, row_max);
    if (r == 0) first_row = row_max;
    within += row_max <= (quantized ? 1e-3f : 1e-4f);
    // Row prompt-1+k predicts greedy[k]; the last row predicts a token past the goldens.
    const size_t k = r + 1 - g.prompt.size();
    if (r + 1 >= g.prompt.size() && k < g.greedy.size()) {
      argmax_ok += static_cast<int32_t>(best) == g.greedy[k];
    } else {
      // Prompt rows and the last row: llama.cpp's argmax.
      size_t want = 0;
      for (size_t v = 1; v < n_vocab; ++v) {
        if (g.logits[r * n_vocab + v] > g.logits[r * n_vocab + want]) want = v;
      }
      argmax_ok += best == want;
    }
  }
  std::printf("[ golden ] %-28s max_abs %.3g, rows within %.0e: %zu/%zu, argmax agree %zu/%zu\n",
              what.c_str(), max_abs, quantized ? 1e-3 : 1e-4, within, rows, argmax_ok, rows);
  if (!quantized) {
    EXPECT_LE(max_abs, 1e-4f) << what;
    EXPECT_EQ(argmax_ok, rows) << what;
    return;
  }
  if (criterion == Criterion::kRecurrentQuantized) {
    EXPECT_LE(first_row, 1e-4f) << what;
    EXPECT_LE(max_abs, 0.5f) << what;
  } else {
    EXPECT_LE(max_abs, 0.3f) << what;
  }
  EXPECT_GE(argmax_ok * 10, rows * 9) << what;
}

struct Layout {
  const char* name;
  const char* layout;
  int n_ranks;
  int n_stages;
  // Routed experts split by columns (every rank a share of every expert) instead of whole.
  bool expert_columns = false;
};

const Layout kLayouts[] = {{"tp2", "tp", 2, 1},     {"tp3", "tp", 3, 1},
                           {"pp2", "pp", 2, 2},     {"pp3", "pp", 3, 3},
                           {"hybrid2x2", "hybrid:2", 4, 2},
                           {"tp2 expert columns", "tp", 2, 1, true}};

// The plan of a layout: ParseLayout's, with the experts split as the layout says.
Result<plan::ShardPlan> PlanFor(const gguf::File& file, const Layout& l) {
  COHORT_ASSIGN_OR_RETURN(plan::LayoutSpec spec, ParseLayout(l.layout, l.n_ranks, {}));
  if (l.expert_columns) spec.expert_split = plan::ExpertSplit::kColumns;
  return PlanOfModel(file, spec);
}

// A folder for the synthesized models, removed when the tests end.
class SynthDir : public ::testing::Environment {
 public:
  static const std::filesystem::path& Path() { return path_; }
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("cohort-arch-golden-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  void TearDown() override { std::filesystem::remove_all(path_); }

 private:
  static std::filesystem::path path_;
};
std::filesystem::path SynthDir::path_;
const auto* const kSynthDir = ::testing::AddGlobalTestEnvironment(new SynthDir);

// The synthesized model of a golden.
std::unique_ptr<gguf::File> Synthesize(const ArchGolden& g) {
  model::SynthOptions o;
  o.shape = g.shape;
  o.type = g.type;
  o.vocab_file = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";
  o.n_layer_override = g.layers;
  o.pure = g.layers > 0;
  o.output = (SynthDir::Path() / (g.shape + "-" + g.type + ".gguf")).string();
  ThreadPool pool(2);
  const Status s = model::Synthesize(o, &pool);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return nullptr;
  auto file = gguf::File::Open(o.output);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  return file.ok() ? std::move(*file) : nullptr;
}

class ArchGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ArchGoldenTest, OneProcessAndRanksMatchLlamaCpp) {
  const std::string name = GetParam();
  const ArchGolden g = LoadArchGolden(name);
  ASSERT_FALSE(g.logits.empty());
  ASSERT_EQ(g.greedy.size(), 32u);
  auto file = Synthesize(g);
  ASSERT_NE(file, nullptr);
  auto one = OneProcess(*file, g);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ExpectMatches(*one, g, name + " 1 rank");
  auto config = model::ModelConfig::FromGguf(*file);
  ASSERT_TRUE(config.ok());
  for (const Layout& l : kLayouts) {
    // At Q4_K_M the minis' 128-wide expert columns and 3-head attention slices are narrower
    // than a 256-wide K-quant block, which the planner refuses to cut (a clear error, checked
    // below): those run pipeline layouts only. A model of fewer layers than a layout's
    // stages (gpt-oss-test's 2) is refused likewise.
    const bool dense = config->moe.n_expert == 0;
    if ((g.type == "q4_k_m" && std::string(l.layout) != "pp") || l.n_stages > config->n_layer) {
      EXPECT_FALSE(PlanFor(*file, l).ok()) << name << " " << l.name;
      continue;
    }
    if (l.expert_columns && dense) continue;  // the same plan as tp2
    auto plan = PlanFor(*file, l);
    ASSERT_TRUE(plan.ok()) << name << " " << l.name << ": " << plan.status().ToString();
    const comm::TransportKind kind =
        std::string(l.layout) == "tp" ? comm::TransportKind::kShm : comm::TransportKind::kTcp;
    auto got = RanksAsThreads(*file, *plan, kind, g);
    ASSERT_TRUE(got.ok()) << l.name << ": " << got.status().ToString();
    ExpectMatches(*got, g, name + " " + l.name);
  }
}

// What the loader makes of the synthesized files: the settings llama.cpp's loaders read for
// these architectures (glm4moe: the MTP block outside the trunk, sigmoid by default, optional
// biases found; minimax-m2: full-width q/k norm, renormalised top-k always).
TEST(ArchConfigTest, ConfigsOfTheMiniModels) {
  ArchGolden glm;
  glm.shape = "glm-4.5-air-mini";
  glm.type = "f32";
  auto glm_file = Synthesize(glm);
  ASSERT_NE(glm_file, nullptr);
  auto c = model::ModelConfig::FromGguf(*glm_file);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->arch, model::Arch::kGlm4Moe);
  EXPECT_EQ(c->n_layer, 4);
  EXPECT_EQ(c->n_nextn_layer, 1);
  EXPECT_EQ(c->head_dim_k, 128);
  EXPECT_EQ(c->rope.n_rot, 64);
  EXPECT_EQ(c->rope.type, model::RopeType::kNeox);
  EXPECT_TRUE(c->qkv_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->qk_norm_full);
  EXPECT_EQ(c->moe.gating, model::ExpertGating::kSigmoid);
  EXPECT_TRUE(c->moe.norm_top_k);
  EXPECT_FLOAT_EQ(c->moe.weights_scale, 2.5f);
  EXPECT_EQ(c->moe.n_leading_dense, 1);
  EXPECT_EQ(c->moe.n_expert_shared, 1);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(3));
  // The MTP block is in the file (blk.4) and outside every stage's layers.
  EXPECT_NE(glm_file->FindTensor("blk.4.nextn.eh_proj.weight"), nullptr);
  auto shape = plan::ModelShapeFromGguf(*glm_file);
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->n_layer, 4);
  EXPECT_EQ(shape->n_nextn_layer, 1);

  ArchGolden mm;
  mm.shape = "minimax-m2-mini";
  mm.type = "f32";
  auto mm_file = Synthesize(mm);
  ASSERT_NE(mm_file, nullptr);
  auto m = model::ModelConfig::FromGguf(*mm_file);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->arch, model::Arch::kMinimaxM2);
  EXPECT_EQ(m->n_layer, 3);
  EXPECT_EQ(m->rope.n_rot, 64);
  EXPECT_TRUE(m->qk_norm_full);
  EXPECT_FALSE(m->qk_norm);
  EXPECT_FALSE(m->qkv_bias);
  EXPECT_TRUE(m->moe.norm_top_k);
  EXPECT_EQ(m->moe.gating, model::ExpertGating::kSigmoid);
  EXPECT_EQ(m->moe.n_expert_shared, 0);
}

// The built-in shapes of the real models count to their published sizes.
TEST(ArchShapesTest, PublishedSizes) {
  auto glm = plan::FindBuiltinShape("glm-4.5-air");
  ASSERT_TRUE(glm.ok());
  EXPECT_TRUE(glm->Validate().ok());
  EXPECT_NEAR(glm->TotalParams() / 1e9, 106.9, 0.1);
  EXPECT_NEAR(glm->ActiveParams() / 1e9, 12.8, 0.1);
  auto mm = plan::FindBuiltinShape("minimax-m2");
  ASSERT_TRUE(mm.ok());
  EXPECT_TRUE(mm->Validate().ok());
  EXPECT_NEAR(mm->TotalParams() / 1e9, 228.7, 0.1);
  EXPECT_NEAR(mm->ActiveParams() / 1e9, 10.4, 0.1);
  for (const char* mini : {"glm-4.5-air-mini", "minimax-m2-mini"}) {
    auto s = plan::FindBuiltinShape(mini);
    ASSERT_TRUE(s.ok()) << mini;
    EXPECT_TRUE(s->Validate().ok()) << mini;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, ArchGoldenTest,
                         ::testing::Values("glm-4.5-air-mini-f32", "glm-4.5-air-mini-q8_0",
                                           "glm-4.5-air-mini-q4_k_m", "minimax-m2-mini-f32",
                                           "minimax-m2-mini-q8_0", "minimax-m2-mini-q4_k_m",
                                           "qwen3.5-0.8b-tiny-vocab-f32",
                                           "qwen3.5-35b-a3b-mini-tiny-vocab-q8_0",
                                           "gpt-oss-test-tiny-vocab-f32", "gpt-oss-test-tiny-vocab-mxfp4"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-' || ch == '.') ch = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace cohort::parallel::testing
