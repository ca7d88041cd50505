// The prefix cache: blocks come back bit for bit, only for an equal prefix, within the budget,
// tails evicted first; and the scheduler with it: a request that starts where an earlier one
// ended computes only the rest and generates exactly what it generates with no cache.
#include "engine/prefix_cache.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "engine/loaded_model.h"
#include "engine/prefix_file.h"
#include "engine/scheduler.h"
#include "model/recurrent_state.h"
#include "model/synth.h"

namespace cohort::engine {
namespace {

constexpr int kLayers = 3;
constexpr int kWidth = 8;

// Fills positions [0, n) of slot seq with values that depend on (seq, pos, layer, element).
void Fill(model::KvCache& cache, int seq, int n, float salt) {
  std::vector<float> k(kWidth), v(kWidth);
  for (int pos = 0; pos < n; ++pos) {
    for (int layer = 0; layer < kLayers; ++layer) {
      for (int e = 0; e < kWidth; ++e) {
        k[e] = salt + pos * 0.25f + layer * 0.125f + e * 0.0625f;
        v[e] = -k[e];
      }
      cache.Store(layer, seq, pos, k.data(), v.data());
    }
  }
}

bool SameRows(const model::KvCache& cache, int seq_a, int seq_b, int n) {
  std::vector<uint8_t> a(cache.RowsBytes(n)), b(cache.RowsBytes(n));
  cache.ReadRows(seq_a, 0, n, a.data());
  cache.ReadRows(seq_b, 0, n, b.data());
  return a == b;
}

model::KvCache MakeCache(DType type = DType::kF16) {
  model::KvCacheOptions o;
  o.n_ctx = 64;
  o.n_seq = 3;
  o.type = type;
  return model::KvCache(o, kLayers, kWidth, kWidth);
}

std::vector<int32_t> Iota(int n, int32_t first = 1) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

TEST(PrefixCache, RowsComeBackBitForBitInAnotherSlot) {
  for (DType type : {DType::kF32, DType::kF16}) {
    model::KvCache cache = MakeCache(type);
    PrefixCache prefix(cache, 1 << 20, 4);
    Fill(cache, 0, 10, 1.0f);
    const std::vector<int32_t> tokens = Iota(10);
    prefix.Save(tokens, cache, 0);
    EXPECT_EQ(prefix.stats().blocks, 2);  // whole blocks only: 8 of 10 positions
    EXPECT_EQ(prefix.stats().bytes, 2 * cache.RowsBytes(4));
    Fill(cache, 1, 20, 7.0f);  // stale rows in the target slot
    EXPECT_EQ(prefix.Restore(tokens, 10, cache, 1), 8);
    EXPECT_EQ(cache.length(1), 8);
    EXPECT_TRUE(SameRows(cache, 0, 1, 8));
  }
}

TEST(PrefixCache, OnlyAnEqualPrefixHits) {
  model::KvCache cache = MakeCache();
  PrefixCache prefix(cache, 1 << 20, 4);
  Fill(cache, 0, 12, 1.0f);
  prefix.Save(Iota(12), cache, 0);
  // The second block alone, after a different first block, is not a hit: chains are exact.
  std::vector<int32_t> other = Iota(12);
  other[1] = 99;
  EXPECT_EQ(prefix.Restore(other, 12, cache, 1), 0);
  // A prompt that diverges inside the third block gets the first two.
  std::vector<int32_t> diverging = Iota(16);
  diverging[9] = 99;
  EXPECT_EQ(prefix.Restore(diverging, 16, cache, 1), 8);
  // max_positions bounds the restore to whole blocks below it.
  EXPECT_EQ(prefix.Restore(Iota(12), 7, cache, 1), 4);
  const PrefixCacheStats s = prefix.stats();
  EXPECT_EQ(s.lookups, 3u);
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.tokens_restored, 12u);
}

TEST(PrefixCache, SharedPrefixIsKeptOnceAndServesSeveralSlots) {
  model::KvCache cache = MakeCache();
  PrefixCache prefix(cache, 1 << 20, 4);
  std::vector<int32_t> a = Iota(12), b = Iota(12);
  b[10] = 500;  // same first two blocks, another third
  Fill(cache, 0, 12, 1.0f);
  prefix.Save(a, cache, 0);
  Fill(cache, 0, 12, 1.0f);
  prefix.Save(b, cache, 0);
  EXPECT_EQ(prefix.stats().blocks, 4);  // two shared, one tail each
  EXPECT_EQ(prefix.Restore(a, 12, cache, 1), 12);
  EXPECT_EQ(prefix.Restore(b, 12, cache, 2), 12);
  EXPECT_TRUE(SameRows(cache, 1, 2, 8));
}

TEST(PrefixCache, EvictsLeastRecentlyUsedTailsWithinTheBudget) {
  model::KvCache cache = MakeCache();
  const int64_t block = cache.RowsBytes(4);
  PrefixCache prefix(cache, 3 * block, 4);
  Fill(cache, 0, 8, 1.0f);
  const std::vector<int32_t> a = Iota(8, 1), b = Iota(8, 100), c = Iota(4, 200);
  prefix.Save(a, cache, 0);  // 2 blocks
  prefix.Save(c, cache, 0);  // 3 blocks: full
  EXPECT_EQ(prefix.Restore(a, 8, cache, 1), 8);  // a is now the most recent
  prefix.Save(b, cache, 0);  // needs 2: evicts c, then a's tail (a leaf), never a's head first
  const PrefixCacheStats s = prefix.stats();
  EXPECT_LE(s.bytes, 3 * block);
  EXPECT_EQ(s.blocks_evicted, 2u);
  EXPECT_EQ(prefix.Restore(c, 4, cache, 1), 0);
  EXPECT_EQ(prefix.Restore(b, 8, cache, 1), 8);
  EXPECT_EQ(prefix.Restore(a, 8, cache, 1), 4);  // a kept its head, lost its tail
  // a's head was used after b's tail: one block more evicts b's tail.
  prefix.Save(c, cache, 0);
  EXPECT_EQ(prefix.Restore(a, 8, cache, 1), 4);
  EXPECT_EQ(prefix.Restore(b, 8, cache, 1), 4);
  EXPECT_EQ(prefix.Restore(c, 4, cache, 1), 4);
  EXPECT_EQ(prefix.stats().blocks_evicted, 3u);
}

TEST(PrefixCache, ABudgetBelowOneBlockKeepsNothing) {
  model::KvCache cache = MakeCache();
  PrefixCache prefix(cache, cache.RowsBytes(4) - 1, 4);
  Fill(cache, 0, 8, 1.0f);
  prefix.Save(Iota(8), cache, 0);
  EXPECT_EQ(prefix.stats().blocks, 0);
  EXPECT_EQ(prefix.Restore(Iota(8), 8, cache, 1), 0);
}

// A cache with a recurrent state beside its rows, as Qwen3.5's: 2 layers, a state of 3 + 5
// floats per layer and slot.
model::KvCache MakeStatefulCache() {
  model::KvCache cache = MakeCache();
  cache.SetSequenceState(std::make_unique<model::RecurrentState>(2, cache.n_seq(), 3, 5));
  return cache;
}

// Sets slot seq's state to values that depend on (seq, salt) and returns its bytes.
std::vector<uint8_t> FillState(model::KvCache& cache, int seq, float salt) {
  auto& state = dynamic_cast<model::RecurrentState&>(*cache.sequence_state());
  for (int l = 0; l < state.n_layer(); ++l) {
    for (int i = 0; i < 3; ++i) state.Conv(l, seq)[i] = salt + l + i * 0.5f;
    for (int i = 0; i < 5; ++i) state.Delta(l, seq)[i] = -salt - l - i * 0.25f;
  }
  std::vector<uint8_t> bytes(state.SeqBytes());
  state.ReadSeq(seq, bytes.data());
  return bytes;
}

std::vector<uint8_t> StateOf(const model::KvCache& cache, int seq) {
  std::vector<uint8_t> bytes(cache.sequence_state()->SeqBytes());
  cache.sequence_state()->ReadSeq(seq, bytes.data());
  return bytes;
}

TEST(PrefixCacheState, RestoresUpToTheLastCheckpointWithItsState) {
  model::KvCache cache = MakeStatefulCache();
  PrefixCache prefix(cache, 1 << 20, 4);
  ASSERT_EQ(prefix.state_bytes(), 2 * (3 + 5) * 4);
  Fill(cache, 0, 14, 1.0f);
  const std::vector<uint8_t> at8 = FillState(cache, 0, 8.0f);
  const std::vector<uint8_t> at4 = FillState(cache, 0, 4.0f);
  const std::vector<int32_t> tokens = Iota(14);
  // Three whole blocks; states after the first and the second.
  prefix.Save(tokens, cache, 0, std::vector<StateCheckpoint>{{4, at4}, {8, at8}});
  PrefixCacheStats s = prefix.stats();
  EXPECT_EQ(s.blocks, 3);
  EXPECT_EQ(s.states, 2);
  EXPECT_EQ(s.bytes, 3 * cache.RowsBytes(4) + 2 * prefix.state_bytes());
  // The chain matches 12 positions; the last block with a state ends at 8.
  EXPECT_EQ(prefix.Match(tokens, 14), 12);
  FillState(cache, 1, 99.0f);  // stale state in the target slot
  EXPECT_EQ(prefix.Restore(tokens, 14, cache, 1), 8);
  EXPECT_EQ(cache.length(1), 8);
  EXPECT_TRUE(SameRows(cache, 0, 1, 8));
  EXPECT_EQ(StateOf(cache, 1), at8);
  // Bounded below 8: the first block and its state.
  EXPECT_EQ(prefix.Restore(tokens, 7, cache, 2), 4);
  EXPECT_EQ(StateOf(cache, 2), at4);
  // No checkpoint in the matching part: nothing, and the slot is empty (its state reset).
  std::vector<int32_t> other = Iota(14);
  other[5] = 99;
  FillState(cache, 2, 5.0f);
  EXPECT_EQ(prefix.Restore(other, 14, cache, 2), 4);
  other[1] = 99;
  EXPECT_EQ(prefix.Restore(other, 14, cache, 2), 0);
  EXPECT_EQ(cache.length(2), 0);
  EXPECT_EQ(StateOf(cache, 2), std::vector<uint8_t>(prefix.state_bytes(), 0));
}

TEST(PrefixCacheState, AStateIsAddedToABlockHeldWithoutOneAndCountsInTheBudget) {
  model::KvCache cache = MakeStatefulCache();
  const int64_t block = cache.RowsBytes(4);
  PrefixCache prefix(cache, 2 * block + 1 * (2 * (3 + 5) * 4), 4);
  Fill(cache, 0, 8, 1.0f);
  prefix.Save(Iota(8), cache, 0);  // rows only: nothing to restore yet
  EXPECT_EQ(prefix.Restore(Iota(8), 8, cache, 1), 0);
  const std::vector<uint8_t> at8 = FillState(cache, 0, 3.0f);
  prefix.Save(Iota(8), cache, 0, std::vector<StateCheckpoint>{{8, at8}});
  EXPECT_EQ(prefix.stats().states, 1);
  EXPECT_EQ(prefix.stats().bytes, prefix.stats().bytes_max);
  EXPECT_EQ(prefix.Restore(Iota(8), 8, cache, 1), 8);
  EXPECT_EQ(StateOf(cache, 1), at8);
  // A third block has no room beside the state but by evicting: the budget holds.
  Fill(cache, 0, 4, 2.0f);
  prefix.Save(Iota(4, 300), cache, 0);
  EXPECT_LE(prefix.stats().bytes, prefix.stats().bytes_max);
}

TEST(PrefixCacheState, ExportImportAndEraseAChain) {
  model::KvCache cache = MakeStatefulCache();
  PrefixCache prefix(cache, 1 << 20, 4);
  Fill(cache, 0, 12, 1.0f);
  const std::vector<uint8_t> at8 = FillState(cache, 0, 8.0f);
  const std::vector<int32_t> tokens = Iota(12);
  prefix.Save(tokens, cache, 0, std::vector<StateCheckpoint>{{8, at8}});
  // The part a restore can use: two blocks, the second with its state.
  const std::vector<PrefixBlockData> chain = prefix.Export(tokens);
  ASSERT_EQ(chain.size(), 2u);
  EXPECT_TRUE(chain[0].state.empty());
  EXPECT_EQ(chain[1].state, at8);
  // Into another cache (a restarted server): the same restore.
  model::KvCache other = MakeStatefulCache();
  PrefixCache imported(other, 1 << 20, 4);
  EXPECT_EQ(imported.Import(chain), 8);
  EXPECT_EQ(imported.Restore(tokens, 12, other, 1), 8);
  EXPECT_EQ(StateOf(other, 1), at8);
  std::vector<uint8_t> a(cache.RowsBytes(8)), b(cache.RowsBytes(8));
  cache.ReadRows(0, 0, 8, a.data());
  other.ReadRows(1, 0, 8, b.data());
  EXPECT_EQ(a, b);
  // Erase drops what no other chain extends.
  std::vector<int32_t> branch = Iota(8);
  branch[6] = 77;
  Fill(other, 0, 8, 5.0f);
  imported.Save(branch, other, 0);  // shares the first block
  EXPECT_EQ(imported.Erase(tokens), 4);
  EXPECT_EQ(imported.stats().blocks, 2);
  EXPECT_EQ(imported.Restore(tokens, 12, other, 1), 0);
}

// A slot file gives back the chain it was written from, states included, and refuses a file
// cut short, padded, altered, or written for another model, cache type, block size or vocabulary.
TEST(PrefixFile, RoundTripsAChainWithStatesAndRefusesAnyMismatch) {
  model::KvCache cache = MakeStatefulCache();
  PrefixCache prefix(cache, 1 << 20, 4);
  Fill(cache, 0, 12, 1.0f);
  const std::vector<uint8_t> at8 = FillState(cache, 0, 8.0f);
  prefix.Save(Iota(12), cache, 0, std::vector<StateCheckpoint>{{8, at8}});
  const std::vector<PrefixBlockData> chain = prefix.Export(Iota(12));
  PrefixFileShape shape;
  shape.model[0] = 42;
  shape.block_tokens = 4;
  shape.block_bytes = prefix.block_bytes();
  shape.state_bytes = prefix.state_bytes();
  const std::vector<uint8_t> bytes = EncodePrefixFile(shape, chain);
  auto back = DecodePrefixFile(bytes, shape, 64);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), chain.size());
  for (size_t i = 0; i < chain.size(); ++i) {
    EXPECT_EQ((*back)[i].tokens, chain[i].tokens);
    EXPECT_EQ((*back)[i].rows, chain[i].rows);
    EXPECT_EQ((*back)[i].state, chain[i].state);
  }
  auto refused = [&](std::vector<uint8_t> file, const PrefixFileShape& want, int32_t n_vocab, const char* why) {
    auto r = DecodePrefixFile(file, want, n_vocab);
    EXPECT_FALSE(r.ok()) << why;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << why;
    }
  };
  refused(std::vector<uint8_t>(bytes.begin(), bytes.end() - 1), shape, 64, "truncated");
  refused(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 20), shape, 64, "a header cut short");
  std::vector<uint8_t> padded = bytes;
  padded.push_back(0);
  refused(padded, shape, 64, "padded");
  std::vector<uint8_t> altered = bytes;
  altered[altered.size() / 2] ^= 1;
  refused(altered, shape, 64, "altered");
  PrefixFileShape other = shape;
  other.model[0] = 43;
  refused(bytes, other, 64, "another model");
  other = shape;
  other.kv_type = DType::kF32;
  refused(bytes, other, 64, "another KV type");
  other = shape;
  other.block_tokens = 8;
  refused(bytes, other, 64, "another block size");
  refused(bytes, shape, 8, "tokens outside the vocabulary");
}

// The scheduler with the prefix cache, on models whose every matmul sums each token in the
// same order whatever the batch (Q4_0 weights, kernels/quant.h GroupedTokens) and an F16 cache:
// a cached prefix's rows are then the very bits a fresh prefill writes, and the tokens and
// logprobs after it must be equal, not merely close.
// A fixture's path; "qwen3.5-0.8b-q8_0" is synthesized once (random Q8_0 weights of
// Qwen3.5-0.8B's shape, its 4 first layers: 3 DeltaNet and 1 gated attention, and the
// fixtures' 512-token vocabulary), the hybrid whose recurrent state the cache checkpoints.
std::string ModelPath(const std::string& name) {
  if (name != "qwen3.5-0.8b-q8_0") return std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name + ".gguf";
  struct SynthFile {
    std::string path = (std::filesystem::temp_directory_path() /
                        ("cohort-prefix-qwen35-" + std::to_string(::getpid()) + ".gguf")).string();
    SynthFile() {
      model::SynthOptions o;
      o.shape = "qwen3.5-0.8b";
      o.type = "q8_0";
      o.pure = true;
      o.n_layer_override = 4;
      o.vocab_file = std::string(COHORT_TEST_DATA) + "/fixtures/models/tiny-llama-f32.gguf";
      o.output = path;
      ThreadPool pool(2);
      const Status s = model::Synthesize(o, &pool);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    ~SynthFile() { std::filesystem::remove(path); }
  };
  static const SynthFile file;
  return file.path;
}

class PrefixSchedulerTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = LoadedModel::Open(ModelPath(GetParam()));
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    model_ = std::move(*loaded);
  }

  static SchedulerOptions Sched(int64_t cache_ram) {
    SchedulerOptions s;
    s.n_parallel = 3;
    s.n_ctx = 256;
    s.kv_type = DType::kF16;
    s.n_batch = 64;
    s.cache_ram_bytes = cache_ram;
    return s;
  }

  static GenerateOptions Greedy(int max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.sampling = GreedyParams();
    o.ignore_eos = true;
    o.top_logprobs = 2;
    return o;
  }

  RequestOutput Run(Scheduler& scheduler, const std::vector<int32_t>& prompt, int max_tokens) {
    auto handle = scheduler.Submit({prompt, Greedy(max_tokens)});
    EXPECT_TRUE(handle.ok()) << handle.status().ToString();
    RequestOutput total;
    while (handle.ok() && !total.done) {
      RequestOutput part;
      if ((*handle)->Wait(part, std::chrono::milliseconds(100))) total.Append(std::move(part));
    }
    EXPECT_TRUE(total.status.ok()) << total.status.ToString();
    return total;
  }

  // Q4_K weights take a 4-token GEMM or the GEMV by the token's place in its batch (F32 ones
  // sgemm or vec_dot), so rows computed while decoding differ from a prefill's in the last
  // bits, and an activation's Q8_K rounding can flip a step (the golden suite's README: flips
  // move logits by up to 0.07-0.2): there the tokens must agree and the logprobs to the
  // quantized fixtures' tolerance (0.3, tests/model/golden_test.cc).
  bool Exact() const { return GetParam().find("q4_k") == std::string::npos; }

  void ExpectEqual(const RequestOutput& a, const RequestOutput& b) const {
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.text, b.text);
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      const float want = b.logprobs[t].chosen.logprob;
      if (Exact()) {
        EXPECT_EQ(a.logprobs[t].chosen.logprob, want) << "token " << t;
      } else {
        EXPECT_NEAR(a.logprobs[t].chosen.logprob, want, 0.3) << "token " << t;
      }
    }
  }

  ThreadPool pool_{1};  // inline: fast on a busy machine
  Logger log_{LogLevel::kWarn};
  Context ctx_{&pool_, &log_};
  std::unique_ptr<LoadedModel> model_;
};

TEST_P(PrefixSchedulerTest, ThreeTurnsReuseEverythingAndGenerateTheSame) {
  std::vector<int32_t> prompt = model_->tokenizer().Encode("Once upon a time there was a little girl", true, true);
  Scheduler cached(*model_, ctx_, Sched(int64_t{64} << 20));
  ASSERT_TRUE(cached.Start().ok());
  std::vector<RequestOutput> fresh_outputs;
  {
    Scheduler fresh(*model_, ctx_, Sched(0));  // no prefix cache: the reference
    ASSERT_TRUE(fresh.Start().ok());
    std::vector<int32_t> p = prompt;
    for (int turn = 0; turn < 3; ++turn) {
      fresh_outputs.push_back(Run(fresh, p, 24));
      EXPECT_EQ(fresh_outputs.back().cached_tokens, 0);
      p.insert(p.end(), fresh_outputs.back().tokens.begin(), fresh_outputs.back().tokens.end());
      for (int i = 0; i < 7; ++i) p.push_back(prompt[1 + i]);  // the next "user turn"
    }
    EXPECT_EQ(fresh.stats().prompt_tokens_cached, 0u);
  }
  uint64_t cached_total = 0;
  int32_t previous = 0;  // the previous turns' prompt and completion tokens
  for (int turn = 0; turn < 3; ++turn) {
    const RequestOutput out = Run(cached, prompt, 24);
    ExpectEqual(out, fresh_outputs[turn]);
    // Everything the earlier turns put in the cache comes back but the last sampled token
    // (never fed) and the part of a block it leaves.
    EXPECT_GE(out.cached_tokens, previous - 16) << "turn " << turn;
    EXPECT_LT(out.cached_tokens, out.prompt_tokens);
    EXPECT_EQ(out.cached_tokens % 16, 0);
    cached_total += out.cached_tokens;
    previous = out.prompt_tokens + out.completion_tokens;
    prompt.insert(prompt.end(), out.tokens.begin(), out.tokens.end());
    for (int i = 0; i < 7; ++i) prompt.push_back(prompt[1 + i]);
  }
  const SchedulerStats stats = cached.stats();
  EXPECT_GT(cached_total, 0u);
  EXPECT_EQ(stats.prompt_tokens_cached, cached_total);
  EXPECT_EQ(stats.prefix_cache_lookups, 3u);
  EXPECT_EQ(stats.prefix_cache_hits, 2u);
  EXPECT_GT(stats.prefix_cache_bytes, 0);
  EXPECT_LE(stats.prefix_cache_bytes, stats.prefix_cache_bytes_max);
}

TEST_P(PrefixSchedulerTest, ConcurrentRequestsShareOneCachedPrefix) {
  const std::vector<int32_t> system =
      model_->tokenizer().Encode("Once upon a time there was a little girl named Lily who loved to play outside in the sun with her big red ball and her dog", true, true);
  Scheduler cached(*model_, ctx_, Sched(int64_t{64} << 20));
  Scheduler fresh(*model_, ctx_, Sched(0));
  ASSERT_TRUE(cached.Start().ok());
  ASSERT_TRUE(fresh.Start().ok());
  Run(cached, system, 2);  // warms the cache with the shared part
  const char* turns[] = {" The cat", " One day", " She was happy"};
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const char* t : turns) {
    std::vector<int32_t> p = system;
    for (int32_t id : model_->tokenizer().Encode(t, false, true)) p.push_back(id);
    prompts.push_back(p);
    handles.push_back(*cached.Submit({p, Greedy(12)}));
  }
  std::vector<RequestOutput> outputs(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    while (!outputs[i].done) {
      RequestOutput part;
      if (handles[i]->Wait(part, std::chrono::milliseconds(100))) outputs[i].Append(std::move(part));
    }
    EXPECT_EQ(outputs[i].cached_tokens, static_cast<int32_t>(system.size()) / 16 * 16) << i;
  }
  // The references only now: a model runs one Forward at a time, never two schedulers' at once.
  for (size_t i = 0; i < prompts.size(); ++i) ExpectEqual(outputs[i], Run(fresh, prompts[i], 12));
}

// Chunked prefill: beside a decoding stream, a long prompt goes in prefill_chunk tokens per
// step, so the stream gets a token every step meanwhile; the prompt's result is unchanged.
TEST_P(PrefixSchedulerTest, ALongPromptIsPrefilledInChunksBesideAStream) {
  SchedulerOptions o = Sched(0);
  o.prefill_chunk = 4;
  Scheduler scheduler(*model_, ctx_, o);
  ASSERT_TRUE(scheduler.Start().ok());
  const std::vector<int32_t> short_prompt = model_->tokenizer().Encode("The cat", true, true);
  std::vector<int32_t> long_prompt;
  while (long_prompt.size() < 60) {
    for (int32_t id : model_->tokenizer().Encode(" Lily and Tom went to the park", false, true)) long_prompt.push_back(id);
  }
  auto stream = scheduler.Submit({short_prompt, Greedy(150)});
  ASSERT_TRUE(stream.ok());
  RequestOutput streamed;
  while (streamed.completion_tokens < 2) {
    RequestOutput part;
    if ((*stream)->Wait(part, std::chrono::milliseconds(100))) streamed.Append(std::move(part));
  }
  const int before = streamed.completion_tokens;
  const RequestOutput joined = Run(scheduler, long_prompt, 1);
  RequestOutput part;
  if ((*stream)->Wait(part, std::chrono::milliseconds(0))) streamed.Append(std::move(part));  // what came so far
  // 60 prompt tokens at 4 a step: at least 15 steps, each with a token for the stream.
  EXPECT_GE(streamed.completion_tokens - before, 14);
  (*stream)->Cancel();
  scheduler.Stop();  // a model runs one Forward at a time: the reference after this one ends
  Scheduler fresh(*model_, ctx_, Sched(0));
  ASSERT_TRUE(fresh.Start().ok());
  ExpectEqual(joined, Run(fresh, long_prompt, 1));
}

// A hybrid model restores only up to a kept state. Requests sharing a system prompt part ways
// inside a chain of blocks that carries no state there: the first request after the warm-up
// computes everything, but keeps the state where its prompt left the cached chain, and from then
// on every request restores the shared part; the tokens stay those of a fresh scheduler.
using PrefixHybridTest = PrefixSchedulerTest;

TEST_P(PrefixHybridTest, RequestsSharingASystemPromptRestoreItFromTheSecondOn) {
  const std::vector<int32_t> system =
      model_->tokenizer().Encode("Once upon a time there was a little girl named Lily who loved to play outside in the sun", true, true);
  Scheduler cached(*model_, ctx_, Sched(int64_t{64} << 20));
  ASSERT_TRUE(cached.Start().ok());
  // The first turn runs a block past the shared part, so that its own kept states lie beyond it.
  const char* turns[] = {" The cat sat on the mat and looked at the big red ball in the garden", " One day",
                         " She was happy", " Then"};
  std::vector<RequestOutput> outputs;
  std::vector<std::vector<int32_t>> prompts;
  for (const char* t : turns) {
    std::vector<int32_t> p = system;
    for (int32_t id : model_->tokenizer().Encode(t, false, true)) p.push_back(id);
    prompts.push_back(p);
    outputs.push_back(Run(cached, p, 6));
  }
  const int32_t shared = static_cast<int32_t>(system.size()) / 16 * 16;
  ASSERT_GE(shared, 16);
  ASSERT_GE(static_cast<int32_t>(prompts[0].size()), shared + 17);
  EXPECT_EQ(outputs[0].cached_tokens, 0);
  EXPECT_EQ(outputs[1].cached_tokens, 0);  // the chain matches, but no state was kept there
  EXPECT_EQ(outputs[2].cached_tokens, shared);
  EXPECT_EQ(outputs[3].cached_tokens, shared);
  const SchedulerStats stats = cached.stats();
  EXPECT_LE(stats.prefix_cache_bytes, stats.prefix_cache_bytes_max);
  cached.Stop();
  Scheduler fresh(*model_, ctx_, Sched(0));
  ASSERT_TRUE(fresh.Start().ok());
  for (size_t i = 0; i < prompts.size(); ++i) ExpectEqual(outputs[i], Run(fresh, prompts[i], 6));
}

INSTANTIATE_TEST_SUITE_P(Hybrid, PrefixHybridTest, ::testing::Values("qwen3.5-0.8b-q8_0"));

INSTANTIATE_TEST_SUITE_P(Models, PrefixSchedulerTest,
                         ::testing::Values("tiny-llama-q4_0", "tiny-qwen3-q4_0", "tiny-llama-q8_0", "tiny-llama-q4_k_m",
                                           "qwen3.5-0.8b-q8_0"));

}  // namespace
}  // namespace cohort::engine
