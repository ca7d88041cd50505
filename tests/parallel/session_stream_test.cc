// Workers without the model file, end to end: Session::Start over real loopback TCP with each
// worker in ServeOneJob on a thread. A worker whose job names a path it does not have (or a
// file there with another sha256) is streamed its share into a sparse file in its cache
// directory, allocating about its share on disk, and the instance gives logits bit-identical
// to the same layout with every worker reading the real file. A corrupted frame fails the
// start with a clear error.
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "comm/tcp_transport.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/file_digest.h"
#include "parallel/model_plan.h"
#include "parallel/session.h"
#include "parallel/shard_bytes.h"
#include "parallel/share_cache.h"
#include "share_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kGen = 4;

struct SessionRun {
  Status started;                 // Session::Start
  Trace trace;
  std::vector<Status> workers;    // what each ServeOneJob returned
};

// Starts one ServeOneJob thread per environment, runs a session over them, and stops it.
SessionRun RunSession(const gguf::File& file, SessionOptions options,
               const std::vector<WorkerEnvironment>& envs) {
  SessionRun run;
  std::vector<std::unique_ptr<comm::TcpListener>> listeners;
  for (size_t i = 0; i < envs.size(); ++i) {
    auto l = comm::TcpListener::Bind("127.0.0.1:0");
    if (!l.ok()) {
      run.started = l.status();
      return run;
    }
    options.workers.push_back((*l)->address());
    listeners.push_back(std::move(*l));
  }
  run.workers.resize(envs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < envs.size(); ++i) {
    threads.emplace_back([&, i] { run.workers[i] = ServeOneJob(listeners[i]->fd(), envs[i], nullptr); });
  }
  {
    auto session = Session::Start(options, file);
    run.started = session.status();
    if (session.ok()) {
      ThreadPool pool(1);
      Context ctx{&pool, nullptr};
      model::KvCacheOptions o;
      o.n_ctx = 64;
      auto cache = (*session)->executor().NewKvCache(o);
      run.started = cache.ok() ? RunTrace((*session)->executor(), ctx, **cache, kGen, &run.trace)
                               : cache.status();
    }
  }
  // A worker the coordinator never reached still waits in accept: wake it with a connection
  // that closes at once.
  for (const auto& l : listeners) (void)ControlChannel::Connect(l->address(), std::chrono::milliseconds(500));
  for (std::thread& t : threads) t.join();
  return run;
}

Trace SingleProcess(const gguf::File& file) {
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  Trace t;
  auto m = model::Model::Load(file);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  model::KvCacheOptions o;
  o.n_ctx = 64;
  auto cache = (*m)->NewKvCache(o);
  EXPECT_TRUE(cache.ok());
  const Status s = RunTrace(**m, ctx, **cache, kGen, &t);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return t;
}

SessionOptions Options(const gguf::File& file, const std::string& model_path, const char* layout, int n_ranks,
                       const ScratchDir& dir) {
  SessionOptions o;
  o.model_path = model_path;
  auto plan = PlanOfLayout(file, layout, n_ranks);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  if (plan.ok()) o.plan = *plan;
  o.digest_cache_dir = dir.Sub("coordinator-digests");
  o.setup_timeout = std::chrono::milliseconds(20000);
  return o;
}

// The one .gguf share file in a worker's cache directory ("" if none or several).
std::string ShareFile(const std::string& cache_dir) {
  std::string found;
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(cache_dir, ec)) {
    if (e.path().extension() == ".gguf") {
      found = e.path().string();
      ++n;
    }
  }
  return n == 1 ? found : "";
}

struct StreamCase {
  const char* name;
  const char* model;
  const char* layout;
  int n_ranks;
};

class SessionStreamTest : public ::testing::TestWithParam<StreamCase> {};

TEST_P(SessionStreamTest, WorkersWithoutTheFileGiveIdenticalLogits) {
  const StreamCase& c = GetParam();
  const std::string path = FixtureModel(c.model);
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ScratchDir dir;
  const int n_workers = c.n_ranks - 1;

  // Reference: every worker has the file at the job's path.
  const SessionRun want = RunSession(**file, Options(**file, path, c.layout, c.n_ranks, dir), std::vector<WorkerEnvironment>(n_workers));
  ASSERT_TRUE(want.started.ok()) << want.started.ToString();

  // No worker has it: the path does not exist on them (nor anywhere).
  std::vector<WorkerEnvironment> envs(n_workers);
  for (int w = 0; w < n_workers; ++w) envs[w].cache_dir = dir.Sub("worker" + std::to_string(w + 1));
  const std::string missing = dir.Sub("nowhere/" + std::string(c.model) + ".gguf");
  const SessionRun got = RunSession(**file, Options(**file, missing, c.layout, c.n_ranks, dir), envs);
  ASSERT_TRUE(got.started.ok()) << got.started.ToString();
  for (size_t w = 0; w < got.workers.size(); ++w) EXPECT_TRUE(got.workers[w].ok()) << got.workers[w].ToString();
  ExpectSameTrace(got.trace, want.trace, 0.0f);
  // And one process: exactly for pipeline stages (same arithmetic); tensor parallelism sums
  // partial products in another order.
  ExpectSameTrace(got.trace, SingleProcess(**file), std::string(c.layout) == "pp" ? 0.0f : 1e-4f);

  // Each worker stored only the blocks of its share, in a file of the model's full size.
  const plan::ShardPlan plan = Options(**file, path, c.layout, c.n_ranks, dir).plan;
  for (int w = 0; w < n_workers; ++w) {
    const std::string share = ShareFile(envs[w].cache_dir);
    ASSERT_FALSE(share.empty()) << "no share file in " << envs[w].cache_dir;
    auto ranges = ShardByteRanges(**file, plan, w + 1);
    ASSERT_TRUE(ranges.ok());
    EXPECT_EQ(std::filesystem::file_size(share), (*file)->file_size());
    const uint64_t allocated = AllocatedBytes(share);
    EXPECT_GE(allocated, TotalBytes(*ranges));
    EXPECT_LE(allocated, BlocksTouchedBytes(*ranges) + 64 * 1024) << "rank " << w + 1;
    EXPECT_LT(allocated, (*file)->file_size() * 3 / 4) << "rank " << w + 1;
    std::printf("rank %d: share %.0f KiB, allocated %.0f KiB of a %.0f KiB model\n", w + 1,
                TotalBytes(*ranges) / 1024.0, allocated / 1024.0, (*file)->file_size() / 1024.0);
  }

  // A second job with the same share reuses the cached file (no new file, same inode).
  struct stat before {};
  ASSERT_EQ(::stat(ShareFile(envs[0].cache_dir).c_str(), &before), 0);
  const SessionRun again = RunSession(**file, Options(**file, missing, c.layout, c.n_ranks, dir), envs);
  ASSERT_TRUE(again.started.ok()) << again.started.ToString();
  ExpectSameTrace(again.trace, want.trace, 0.0f);
  struct stat after {};
  ASSERT_EQ(::stat(ShareFile(envs[0].cache_dir).c_str(), &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino);
}

INSTANTIATE_TEST_SUITE_P(Layouts, SessionStreamTest,
                         ::testing::Values(StreamCase{"llama_tp2", "tiny-llama-f32", "tp", 2},
                                           StreamCase{"llama_tp3", "tiny-llama-f32", "tp", 3},
                                           StreamCase{"llama_pp2", "tiny-llama-f32", "pp", 2},
                                           StreamCase{"deepseek2_pp3", "tiny-deepseek2-f32", "pp", 3},
                                           StreamCase{"qwen3moe_tp3", "tiny-qwen3moe-f32", "tp", 3},
                                           StreamCase{"llama_q4_0_tp2", "tiny-llama-q4_0", "tp", 2},
                                           StreamCase{"qwen3_tp4", "tiny-qwen3-f32", "tp", 4},
                                           StreamCase{"qwen2_hybrid2x2", "tiny-qwen2-f32", "hybrid:2", 4}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SessionStreamFiles, LocalFileWithAnotherDigestIsNotUsed) {
  const std::string path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  ScratchDir dir;
  const SessionRun want = RunSession(**file, Options(**file, path, "tp", 2, dir), std::vector<WorkerEnvironment>(1));
  ASSERT_TRUE(want.started.ok()) << want.started.ToString();

  // Same name and size at the job's path, one byte of output_norm different.
  std::vector<uint8_t> bytes = ReadWholeFile(path);
  const gguf::TensorInfo* norm = (*file)->FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  bytes[(*file)->data_offset() + norm->offset + 1] ^= 0x40;
  std::filesystem::create_directories(dir.Sub("other"));
  const std::string impostor = dir.Sub("other/tiny-llama-f32.gguf");
  ASSERT_TRUE(WriteWholeFile(impostor, bytes));
  WorkerEnvironment env;
  env.cache_dir = dir.Sub("worker");
  const SessionRun got = RunSession(**file, Options(**file, impostor, "tp", 2, dir), {env});
  ASSERT_TRUE(got.started.ok()) << got.started.ToString();
  ExpectSameTrace(got.trace, want.trace, 0.0f);
  EXPECT_FALSE(ShareFile(env.cache_dir).empty()) << "the worker should have fetched its share";
}

TEST(SessionStreamFiles, MatchingFileInTheModelsDirectoryIsUsed) {
  const std::string path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  ScratchDir dir;
  std::filesystem::create_directories(dir.Sub("models"));
  std::filesystem::copy_file(path, dir.Sub("models/tiny-llama-f32.gguf"));
  WorkerEnvironment env;
  env.cache_dir = dir.Sub("worker");
  env.models_dir = dir.Sub("models");
  // The job's directory part is ignored in the models directory: only the file name counts.
  const SessionRun got = RunSession(**file, Options(**file, "/no/such/../dir/tiny-llama-f32.gguf", "tp", 2, dir), {env});
  ASSERT_TRUE(got.started.ok()) << got.started.ToString();
  EXPECT_EQ(got.trace.ids.size(), static_cast<size_t>(kGen + 1));
  EXPECT_TRUE(ShareFile(env.cache_dir).empty()) << "nothing should have been streamed";
}

TEST(SessionStreamFiles, KnownFileIsUsedByDigest) {
  const std::string path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  ScratchDir dir;
  auto sha = Sha256OfFile(path);
  ASSERT_TRUE(sha.ok());
  WorkerEnvironment env;
  env.cache_dir = dir.Sub("worker");
  env.known_files[*sha] = path;  // under another name than the job's
  const SessionRun got = RunSession(**file, Options(**file, dir.Sub("elsewhere/model.gguf"), "pp", 2, dir), {env});
  ASSERT_TRUE(got.started.ok()) << got.started.ToString();
  EXPECT_EQ(got.trace.ids.size(), static_cast<size_t>(kGen + 1));
  EXPECT_TRUE(ShareFile(env.cache_dir).empty()) << "nothing should have been streamed";
}

TEST(SessionStreamFiles, CorruptedFrameFailsTheStartClearly) {
  const std::string path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  ScratchDir dir;
  SessionOptions o = Options(**file, dir.Sub("nowhere/tiny-llama-f32.gguf"), "tp", 3, dir);
  // Small frames, the first one corrupted: the worker rejects it while hundreds more are
  // still on their way, and both sides must still name the digest as the cause.
  o.transfer.frame_data_bytes = 4096;
  o.transfer.tamper_for_test = [](std::vector<uint8_t>& frame) {
    const bool first = std::all_of(frame.begin() + 16, frame.begin() + 24, [](uint8_t b) { return b == 0; });
    if (first) frame[frame.size() / 2] ^= 0x01;  // frame 0 of each worker's transfer
  };
  std::vector<WorkerEnvironment> envs(2);
  for (int w = 0; w < 2; ++w) envs[w].cache_dir = dir.Sub("worker" + std::to_string(w));
  const auto start = std::chrono::steady_clock::now();
  const SessionRun got = RunSession(**file, o, envs);
  ASSERT_FALSE(got.started.ok());
  EXPECT_NE(got.started.message().find("sha256"), std::string::npos) << got.started.ToString();
  for (const Status& w : got.workers) {
    EXPECT_FALSE(w.ok());
    EXPECT_NE(w.message().find("sha256"), std::string::npos) << w.ToString();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Nothing half-written is left to be mistaken for a share later.
  for (const auto& env : envs) EXPECT_TRUE(ShareFile(env.cache_dir).empty());
}

// A share in the cache under the model's digest whose bytes are not the model's (another job,
// or the disk, changed them) is not used: the worker fetches its share again and the logits
// are the model's.
TEST(SessionStreamFiles, PoisonedCachedShareIsNotUsed) {
  const std::string path = FixtureModel("tiny-llama-f32");
  auto file = gguf::File::Open(path);
  ASSERT_TRUE(file.ok());
  ScratchDir dir;
  const std::string nowhere = dir.Sub("nowhere/tiny-llama-f32.gguf");
  WorkerEnvironment env;
  env.cache_dir = dir.Sub("worker");
  const SessionRun want = RunSession(**file, Options(**file, nowhere, "tp", 2, dir), {env});
  ASSERT_TRUE(want.started.ok()) << want.started.ToString();
  const std::string share = ShareFile(env.cache_dir);
  ASSERT_FALSE(share.empty());
  // One byte of output_norm (every tp rank holds it whole) flipped in the cached share.
  const gguf::TensorInfo* norm = (*file)->FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  std::vector<uint8_t> bytes = ReadWholeFile(share);
  bytes[(*file)->data_offset() + norm->offset + 1] ^= 0x40;
  ASSERT_TRUE(WriteWholeFile(share, bytes));
  const SessionRun got = RunSession(**file, Options(**file, nowhere, "tp", 2, dir), {env});
  ASSERT_TRUE(got.started.ok()) << got.started.ToString();
  ExpectSameTrace(got.trace, want.trace, 0.0f);
  EXPECT_NE(ReadWholeFile(ShareFile(env.cache_dir)), bytes) << "the poisoned share should have been replaced";
}

// The cache keeps at most its bound: shares of two models (one-byte-different files, as an
// attacker would send) leave one share when the bound holds one, the most recent.
TEST(SessionStreamFiles, CacheBoundEvictsTheLeastRecentlyUsedShare) {
  const std::string path = FixtureModel("tiny-llama-f32");
  ScratchDir dir;
  std::vector<uint8_t> bytes = ReadWholeFile(path);
  auto original = gguf::File::Open(path);
  ASSERT_TRUE(original.ok());
  const gguf::TensorInfo* norm = (*original)->FindTensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  const size_t at = (*original)->data_offset() + norm->offset + 1;
  std::filesystem::create_directories(dir.Sub("models"));
  WorkerEnvironment env;
  env.cache_dir = dir.Sub("worker");
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    bytes[at] = static_cast<uint8_t>(bytes[at] + 1);
    const std::string variant = dir.Sub("models/variant" + std::to_string(i) + ".gguf");
    ASSERT_TRUE(WriteWholeFile(variant, bytes));
    auto file = gguf::File::Open(variant);
    ASSERT_TRUE(file.ok());
    if (i == 0) {
      const SessionRun first = RunSession(**file, Options(**file, dir.Sub("nowhere/v.gguf"), "tp", 2, dir), {env});
      ASSERT_TRUE(first.started.ok()) << first.started.ToString();
      // Room for this one share (and a little), not two.
      env.cache_bytes_max = ShareCacheBytes(env.cache_dir) * 3 / 2;
      continue;
    }
    const SessionRun run = RunSession(**file, Options(**file, dir.Sub("nowhere/v.gguf"), "tp", 2, dir), {env});
    ASSERT_TRUE(run.started.ok()) << run.started.ToString();
    EXPECT_LE(ShareCacheBytes(env.cache_dir), env.cache_bytes_max);
    const std::string kept = ShareFile(env.cache_dir);
    ASSERT_FALSE(kept.empty()) << "exactly one share should be left";
    auto sha = Sha256OfFile(variant);
    ASSERT_TRUE(sha.ok());
    EXPECT_NE(kept.find(*sha), std::string::npos) << kept << " is not the latest model's share";
  }
  // A bound smaller than one share refuses the job rather than overfill the cache.
  env.cache_bytes_max = 4096;
  bytes[at] = static_cast<uint8_t>(bytes[at] + 1);
  const std::string last = dir.Sub("models/last.gguf");
  ASSERT_TRUE(WriteWholeFile(last, bytes));
  auto file = gguf::File::Open(last);
  ASSERT_TRUE(file.ok());
  const SessionRun refused = RunSession(**file, Options(**file, dir.Sub("nowhere/v.gguf"), "tp", 2, dir), {env});
  ASSERT_FALSE(refused.started.ok());
  EXPECT_NE(refused.started.message().find("cache"), std::string::npos) << refused.started.ToString();
}

}  // namespace
}  // namespace cohort::parallel::testing
