// Several sequences in one batch, each in its own cache slot, must give the same logits as
// each sequence run alone: no attention leaks across sequences and positions stay per slot.
#include "golden_util.h"

namespace cohort::model::testing {
namespace {

class MultiSeqTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MultiSeqTest, TwoSequencesInOneBatchEqualEachAlone) {
  Loaded l = LoadModel(GetParam());
  ASSERT_NE(l.model, nullptr);
  Model& model = *l.model;
  ThreadPool pool(2);
  const Context ctx{&pool, nullptr};
  const int n_vocab = model.config().n_vocab;
  const std::vector<int32_t> a = {1, 10, 20, 30, 40, 50, 60};
  const std::vector<int32_t> b = {1, 77, 5, 300, 42};

  KvCacheOptions one;
  one.n_ctx = 64;
  auto cache_a = model.NewKvCache(one);
  auto cache_b = model.NewKvCache(one);
  ASSERT_TRUE(cache_a.ok() && cache_b.ok());
  const std::vector<float> alone_a = RunChunks(model, ctx, **cache_a, a, a.size(), 1);
  const std::vector<float> alone_b = RunChunks(model, ctx, **cache_b, b, b.size(), 1);

  // Interleave both prompts in one batch (slot 1 for a, slot 0 for b), then decode one more
  // token of each together.
  KvCacheOptions two = one;
  two.n_seq = 2;
  auto cache = model.NewKvCache(two);
  ASSERT_TRUE(cache.ok());
  Batch batch;
  const size_t n_first_a = a.size() - 1, n_first_b = b.size() - 1;
  for (size_t i = 0; i < std::max(n_first_a, n_first_b); ++i) {
    if (i < n_first_a) batch.Add(a[i], static_cast<int>(i), 1, true);
    if (i < n_first_b) batch.Add(b[i], static_cast<int>(i), 0, true);
  }
  std::vector<float> logits(batch.n_logits() * n_vocab);
  ASSERT_TRUE(model.Forward(ctx, batch, **cache, logits).ok());
  size_t row = 0;
  for (size_t i = 0; i < std::max(n_first_a, n_first_b); ++i) {
    for (int s : {1, 0}) {
      const std::vector<float>& alone = s == 1 ? alone_a : alone_b;
      if (i >= (s == 1 ? n_first_a : n_first_b)) continue;
      for (int v = 0; v < n_vocab; ++v) {
        ASSERT_NEAR(logits[row * n_vocab + v], alone[i * n_vocab + v], 1e-5f) << "seq " << s << " pos " << i;
      }
      ++row;
    }
  }
  batch.Clear();
  batch.Add(b.back(), static_cast<int>(n_first_b), 0, true);
  batch.Add(a.back(), static_cast<int>(n_first_a), 1, true);
  logits.assign(2 * n_vocab, 0.0f);
  ASSERT_TRUE(model.Forward(ctx, batch, **cache, logits).ok());
  for (int v = 0; v < n_vocab; ++v) {
    ASSERT_NEAR(logits[v], alone_b[n_first_b * n_vocab + v], 1e-5f);
    ASSERT_NEAR(logits[n_vocab + v], alone_a[n_first_a * n_vocab + v], 1e-5f);
  }
}

TEST_P(MultiSeqTest, OnlyRequestedRowsGetLogits) {
  Loaded l = LoadModel(GetParam());
  ASSERT_NE(l.model, nullptr);
  Model& model = *l.model;
  const Context ctx{nullptr, nullptr};
  const int n_vocab = model.config().n_vocab;
  const std::vector<int32_t> toks = {1, 10, 20, 30, 40};
  KvCacheOptions o;
  o.n_ctx = 32;
  auto all_cache = model.NewKvCache(o);
  auto last_cache = model.NewKvCache(o);
  ASSERT_TRUE(all_cache.ok() && last_cache.ok());
  const std::vector<float> all = RunChunks(model, ctx, **all_cache, toks, toks.size(), 1);
  Batch batch;
  for (size_t i = 0; i < toks.size(); ++i) batch.Add(toks[i], static_cast<int>(i), 0, i == 2 || i == 4);
  std::vector<float> logits(2 * n_vocab);
  ASSERT_TRUE(model.Forward(ctx, batch, **last_cache, logits).ok());
  for (int v = 0; v < n_vocab; ++v) {
    ASSERT_NEAR(logits[v], all[2 * n_vocab + v], 1e-5f);
    ASSERT_NEAR(logits[n_vocab + v], all[4 * n_vocab + v], 1e-5f);
  }
}

TEST_P(MultiSeqTest, ThreadCountDoesNotChangeLogits) {
  Loaded l = LoadModel(GetParam());
  ASSERT_NE(l.model, nullptr);
  const std::vector<int32_t> toks = {1, 10, 20, 30, 40, 50, 60, 70, 80};
  std::vector<float> results[2];
  const int threads[2] = {1, 3};
  for (int i = 0; i < 2; ++i) {
    ThreadPool pool(threads[i]);
    const Context ctx{&pool, nullptr};
    KvCacheOptions o;
    o.n_ctx = 32;
    auto cache = l.model->NewKvCache(o);
    ASSERT_TRUE(cache.ok());
    results[i] = RunChunks(*l.model, ctx, **cache, toks, 6, 1);
  }
  EXPECT_EQ(results[0], results[1]);  // bitwise: every output element has one owner thread
}

INSTANTIATE_TEST_SUITE_P(Archs, MultiSeqTest,
                         ::testing::Values("tiny-llama-f32", "tiny-qwen3moe-f32",
                                           "tiny-deepseek2-f32", "tiny-llama-q4_k_m"),
                         FixtureParamName);

}  // namespace
}  // namespace cohort::model::testing
