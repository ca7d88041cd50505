// After warm-up, a decode step (one token per sequence) must not allocate: scratch buffers
// are sized once per model/batch size and reused. Counted with a replaced operator new, so
// this test lives in its own binary.
#include <atomic>
#include <cstdlib>
#include <new>

#include "golden_util.h"

namespace {
std::atomic<bool> g_count_allocations{false};
std::atomic<int> g_allocations{0};
}  // namespace

[[gnu::noinline]] void* operator new(std::size_t size) {
  if (g_count_allocations.load(std::memory_order_relaxed)) ++g_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace cohort::model::testing {
namespace {

class AllocTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AllocTest, DecodeStepsAllocateNothingAfterWarmUp) {
  Loaded l = LoadModel(GetParam());
  ASSERT_NE(l.model, nullptr);
  Model& model = *l.model;
  ThreadPool pool(2);
  const Context ctx{&pool, nullptr};
  KvCacheOptions o;
  o.n_ctx = 64;
  o.n_seq = 2;
  auto cache = model.NewKvCache(o);
  ASSERT_TRUE(cache.ok());
  std::vector<float> logits(2 * model.config().n_vocab);
  Batch batch;
  batch.tokens.reserve(2);
  batch.positions.reserve(2);
  batch.seq_ids.reserve(2);
  batch.want_logits.reserve(2);
  int allocations = 0;
  for (int step = 0; step < 12; ++step) {
    batch.Clear();
    batch.Add(10 + step, step, 0, true);
    batch.Add(20 + step, step, 1, true);
    const bool counting = step >= 4;  // warm-up: the first steps size the scratch
    g_allocations = 0;
    g_count_allocations = counting;
    const Status s = model.Forward(ctx, batch, **cache, logits);
    g_count_allocations = false;
    ASSERT_TRUE(s.ok()) << s.ToString();
    if (counting) allocations += g_allocations.load();
  }
  EXPECT_EQ(allocations, 0);
}

INSTANTIATE_TEST_SUITE_P(Archs, AllocTest,
                         ::testing::Values("tiny-llama-q4_k_m", "tiny-qwen2-f32",
                                           "tiny-qwen3moe-f32", "tiny-deepseek2-f32"),
                         FixtureParamName);

}  // namespace
}  // namespace cohort::model::testing
