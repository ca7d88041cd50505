// "N ranks equal 1 rank" at block level: attention over disjoint head ranges (each with its own
// KV cache of its KV heads), FFN over disjoint column ranges and MoE over disjoint expert
// ranges must sum to the full block's output. This is what tensor parallelism relies on.
#include <random>

#include "golden_util.h"
#include "model/gqa_attention.h"
#include "model/gqa_model.h"
#include "model/mla_attention.h"
#include "model/weights.h"

namespace cohort::model::testing {
namespace {

std::vector<float> RandomActs(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Fixture {
  std::unique_ptr<gguf::File> file;
  ModelConfig config;
};

Fixture Open(const char* name) {
  Fixture s;
  auto file = gguf::File::Open(FixturePath(std::string("models/") + name + ".gguf"));
  EXPECT_TRUE(file.ok());
  s.file = std::move(*file);
  auto c = ModelConfig::FromGguf(*s.file);
  EXPECT_TRUE(c.ok());
  s.config = *c;
  return s;
}

float MaxDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float max = 0.0f;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) max = std::max(max, std::fabs(a[i] - b[i]));
  return max;
}

// split == full, and the first part alone is far from full (both parts contribute).
void ExpectSplitSums(const std::vector<float>& split, const std::vector<float>& first_part,
                     const std::vector<float>& full, float tol) {
  EXPECT_LE(MaxDiff(split, full), tol);
  EXPECT_GT(MaxDiff(first_part, full), 1e-2f);
}

// Runs two batches (a 4-token prompt, then one token) through `run(heads, cache, out)` for
// each head range and returns the summed outputs of both batches.
template <typename Run>
std::vector<float> SumOverRanges(const std::vector<HeadRange>& ranges, int64_t kv_width_per_head,
                                 int group, bool mla, int n_embd, const Run& run) {
  std::vector<float> total;
  for (HeadRange r : ranges) {
    KvCacheOptions o;
    o.n_ctx = 16;
    const int64_t k_width = mla ? kv_width_per_head : r.size() / group * kv_width_per_head;
    KvCache cache(o, 1, k_width, mla ? 0 : k_width);
    std::vector<float> out = run(r, cache);
    if (total.empty()) total.assign(out.size(), 0.0f);
    for (size_t i = 0; i < out.size(); ++i) total[i] += out[i];
  }
  return total;
}

std::vector<float> TwoBatches(const std::function<void(const BlockEnv&, const float*, float*)>& block,
                              int n_embd) {
  std::vector<uint8_t> scratch;
  const std::vector<int32_t> pos = {0, 1, 2, 3, 4};
  const std::vector<int32_t> seq = {0, 0, 0, 0, 0};
  const std::vector<float> x = RandomActs(5 * n_embd, 42);
  std::vector<float> out(5 * n_embd);
  BlockEnv prompt{nullptr, 4, pos.data(), seq.data(), &scratch};
  block(prompt, x.data(), out.data());
  BlockEnv decode{nullptr, 1, pos.data() + 4, seq.data(), &scratch};
  block(decode, x.data() + 4 * n_embd, out.data() + 4 * n_embd);
  return out;
}

class GqaShardTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GqaShardTest, HeadRangesSumToAllHeads) {
  Fixture s = Open(GetParam());
  const ModelConfig& c = s.config;
  const WeightLoader loader(*s.file);
  auto w = LoadGqaWeights(loader, c, 1);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  GqaParams p{c.n_embd, c.n_head, c.n_head_kv, c.head_dim_k, c.kq_scale, c.rms_eps, MakeRopeParams(c, nullptr)};
  const int group = c.n_head / c.n_head_kv;
  auto run = [&](HeadRange r, KvCache& cache) {
    GqaScratch scratch;
    return TwoBatches([&](const BlockEnv& env, const float* x, float* out) {
      GqaAttention(env, *w, p, r, 0, x, cache, scratch, out);
    }, c.n_embd);
  };
  const std::vector<float> full = SumOverRanges({{0, c.n_head}}, c.head_dim_k, group, false, c.n_embd, run);
  const std::vector<float> split = SumOverRanges({{0, group}, {group, c.n_head}}, c.head_dim_k, group, false, c.n_embd, run);
  const std::vector<float> first = SumOverRanges({{0, group}}, c.head_dim_k, group, false, c.n_embd, run);
  ExpectSplitSums(split, first, full, 1e-4f);
}

INSTANTIATE_TEST_SUITE_P(Archs, GqaShardTest,
                         ::testing::Values("tiny-llama-f32", "tiny-qwen2-f32", "tiny-qwen3-f32",
                                           "tiny-llama-q8_0"));

TEST(MlaShardTest, HeadRangesSumToAllHeads) {
  Fixture s = Open("tiny-deepseek2-f32");
  const ModelConfig& c = s.config;
  auto model_file_loader = WeightLoader(*s.file);
  MlaWeights w;
  const char* kLayer1[] = {"attn_q_a", "attn_q_b", "attn_kv_a_mqa", "attn_k_b", "attn_v_b", "attn_output"};
  TensorView* views[] = {&w.q_a, &w.q_b, &w.kv_a_mqa, &w.k_b, &w.v_b, &w.wo};
  for (int i = 0; i < 6; ++i) {
    const gguf::TensorInfo* t = s.file->FindTensor(WeightLoader::Blk(1, kLayer1[i]));
    ASSERT_NE(t, nullptr);
    std::array<int64_t, 4> ne = {1, 1, 1, 1};
    for (size_t d = 0; d < t->ne.size(); ++d) ne[d] = t->ne[d];
    *views[i] = TensorView::Make(t->type, s.file->TensorData(*t).data(), ne);
  }
  auto qn = model_file_loader.Vector(WeightLoader::Blk(1, "attn_q_a_norm"), c.mla.q_lora_rank);
  auto kvn = model_file_loader.Vector(WeightLoader::Blk(1, "attn_kv_a_norm"), c.mla.kv_lora_rank);
  ASSERT_TRUE(qn.ok() && kvn.ok());
  w.q_a_norm = *qn;
  w.kv_a_norm = *kvn;
  MlaParams p{c.n_embd, c.n_head, c.mla.q_lora_rank, c.mla.kv_lora_rank, c.mla.qk_nope_dim,
              c.mla.qk_rope_dim, c.mla.v_head_dim, c.kq_scale, c.rms_eps, MakeRopeParams(c, nullptr)};
  const int64_t width = c.mla.kv_lora_rank + c.mla.qk_rope_dim;
  auto run = [&](HeadRange r, KvCache& cache) {
    MlaScratch scratch;
    return TwoBatches([&](const BlockEnv& env, const float* x, float* out) {
      MlaAttention(env, w, p, r, 0, x, cache, scratch, out);
    }, c.n_embd);
  };
  const std::vector<float> full = SumOverRanges({{0, 4}}, width, 1, true, c.n_embd, run);
  const std::vector<float> split = SumOverRanges({{0, 1}, {1, 4}}, width, 1, true, c.n_embd, run);
  const std::vector<float> first = SumOverRanges({{0, 1}}, width, 1, true, c.n_embd, run);
  ExpectSplitSums(split, first, full, 1e-4f);
}

TEST(FfnShardTest, ColumnRangesSumToFullFfn) {
  for (const char* name : {"tiny-llama-f32", "tiny-llama-q4_k_m", "tiny-llama-iq3_xxs", "tiny-llama-iq3_s"}) {
    Fixture s = Open(name);
    const ModelConfig& c = s.config;
    auto w = LoadDenseFfn(WeightLoader(*s.file), c, 0, c.n_ff, "");
    ASSERT_TRUE(w.ok());
    const int n = 3;
    const std::vector<float> x = RandomActs(n * c.n_embd, 7);
    std::vector<uint8_t> scratch;
    DenseFfnScratch fs;
    std::vector<float> full(n * c.n_embd), a(n * c.n_embd), b(n * c.n_embd);
    DenseFfn(nullptr, &scratch, *w, {0, c.n_ff}, x.data(), n, fs, full.data());
    // K-quant and i-quant columns split on 256-element block boundaries.
    DenseFfn(nullptr, &scratch, *w, {0, 256}, x.data(), n, fs, a.data());
    DenseFfn(nullptr, &scratch, *w, {256, c.n_ff}, x.data(), n, fs, b.data());
    const std::vector<float> first = a;
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
    ExpectSplitSums(a, first, full, 1e-4f);
  }
}

TEST(MoeShardTest, ExpertAndSharedColumnRangesSumToFullMoe) {
  Fixture s = Open("tiny-deepseek2-f32");
  const ModelConfig& c = s.config;
  auto w = LoadMoeWeights(WeightLoader(*s.file), c, 2);
  ASSERT_TRUE(w.ok());
  const int n = 6;
  const std::vector<float> x = RandomActs(n * c.n_embd, 9);
  std::vector<uint8_t> scratch;
  MoeScratch ms;
  std::vector<float> full(n * c.n_embd), a(n * c.n_embd), b(n * c.n_embd);
  const ColumnRange whole{0, c.moe.n_ff_expert};  // every column of the experts evaluated
  MoeFfn(nullptr, &scratch, c.moe, *w, {0, 8}, whole, {0, 32}, x.data(), n, c.n_embd, ms, full.data());
  MoeFfn(nullptr, &scratch, c.moe, *w, {0, 3}, whole, {0, 16}, x.data(), n, c.n_embd, ms, a.data());
  MoeFfn(nullptr, &scratch, c.moe, *w, {3, 8}, whole, {16, 32}, x.data(), n, c.n_embd, ms, b.data());
  const std::vector<float> first = a;
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  ExpectSplitSums(a, first, full, 1e-5f);
}

// Column shares of every routed expert (ExpertSplit::kColumns) sum to the whole block as the
// expert subsets do: every share routes alike and evaluates its columns of the same experts.
TEST(MoeShardTest, ExpertColumnRangesSumToFullMoe) {
  Fixture s = Open("tiny-deepseek2-f32");
  const ModelConfig& c = s.config;
  auto w = LoadMoeWeights(WeightLoader(*s.file), c, 2);
  ASSERT_TRUE(w.ok());
  const int n = 6;
  const std::vector<float> x = RandomActs(n * c.n_embd, 11);
  std::vector<uint8_t> scratch;
  MoeScratch ms;
  std::vector<float> full(n * c.n_embd), a(n * c.n_embd), b(n * c.n_embd);
  const int64_t split = c.moe.n_ff_expert / 3;
  const ExpertRange all{0, c.moe.n_expert};
  MoeFfn(nullptr, &scratch, c.moe, *w, all, {0, c.moe.n_ff_expert}, {0, 32}, x.data(), n, c.n_embd, ms, full.data());
  MoeFfn(nullptr, &scratch, c.moe, *w, all, {0, split}, {0, 16}, x.data(), n, c.n_embd, ms, a.data());
  MoeFfn(nullptr, &scratch, c.moe, *w, all, {split, c.moe.n_ff_expert}, {16, 32}, x.data(), n, c.n_embd, ms,
         b.data());
  const std::vector<float> first = a;
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  ExpectSplitSums(a, first, full, 1e-5f);
}

}  // namespace
}  // namespace cohort::model::testing
