// Streaming shares of a realistic model (Llama-3.2-1B shape, Q4_0, cut to 2 layers: ~215 MB,
// synthesized with `cohort synth`) to two `cohort worker` processes that have no copy: the
// instance equals one with the file bit for bit, each worker stores (st_blocks) and holds
// (peak RSS) about its share, never the whole model. Prints the transfer time. Label slow.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "parallel/model_plan.h"
#include "parallel/session.h"
#include "parallel/shard_bytes.h"
#include "process_util.h"
#include "share_util.h"
#include "trace_util.h"

namespace cohort::parallel::testing {
namespace {

constexpr int kRanks = 3;

struct Instance {
  std::vector<Child> workers;
  std::vector<std::string> logs;
  SessionOptions options;
};

// Starts kRanks-1 `cohort -v worker --once --cache-dir` processes.
void StartWorkers(const ScratchDir& dir, const std::string& tag, Instance* in) {
  const std::string prefix = "cohort worker: listening on ";
  for (int w = 1; w < kRanks; ++w) {
    const std::string name = tag + std::to_string(w);
    in->logs.push_back(dir.Sub(name + ".log"));
    in->workers.push_back(Child::Start({CohortBinary(), "-v", "-t", "1", "worker", "--listen",
                                        "127.0.0.1:0", "--once", "--cache-dir", dir.Sub(name)},
                                       in->logs.back()));
    const std::string line = in->workers.back().ReadLine(10000);
    ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
    in->options.workers.push_back(line.substr(prefix.size()));
  }
}

Result<Trace> RunInstance(const gguf::File& file, const SessionOptions& options, double* start_s) {
  const auto t0 = std::chrono::steady_clock::now();
  COHORT_ASSIGN_OR_RETURN(auto session, Session::Start(options, file));
  *start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ThreadPool pool(1);
  Context ctx{&pool, nullptr};
  model::KvCacheOptions o;
  o.n_ctx = 64;
  COHORT_ASSIGN_OR_RETURN(auto cache, session->executor().NewKvCache(o));
  Trace t;
  COHORT_RETURN_IF_ERROR(RunTrace(session->executor(), ctx, *cache, 2, &t));
  return t;
}

double PeakMiB(const std::string& log) {
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("peak resident ([0-9.]+) MiB"))) return -1;
  return std::stod(m[1]);
}

TEST(WorkerStreamBigTest, OneBillionShapeOverThreeRanks) {
  ScratchDir dir;
  const std::string model = dir.Sub("l1b-2layers.gguf");
  Child synth = Child::Start({CohortBinary(), "-t", "1", "synth", "--shape", "llama-3.2-1b", "--type",
                              "q4_0", "--pure", "--layers", "2", "-o", model});
  ASSERT_EQ(synth.Wait(120000), 0);
  auto file = gguf::File::Open(model);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const double model_mib = (*file)->file_size() / 1048576.0;

  Instance with_file, without;
  with_file.options.model_path = model;
  without.options.model_path = dir.Sub("elsewhere/l1b-2layers.gguf");
  for (Instance* in : {&with_file, &without}) {
    auto plan = PlanOfLayout(**file, "tp", kRanks);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    in->options.plan = *plan;
    in->options.digest_cache_dir = dir.Sub("coordinator");
  }
  StartWorkers(dir, "local", &with_file);
  double local_s = 0, streamed_s = 0;
  auto want = RunInstance(**file, with_file.options, &local_s);
  ASSERT_TRUE(want.ok()) << want.status().ToString();
  StartWorkers(dir, "stream", &without);
  auto got = RunInstance(**file, without.options, &streamed_s);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameTrace(*got, *want, 0.0f);

  const plan::ShardPlan* plan = &without.options.plan;
  for (int w = 1; w < kRanks; ++w) {
    EXPECT_EQ(without.workers[w - 1].Wait(10000), 0);
    EXPECT_EQ(with_file.workers[w - 1].Wait(10000), 0);
    auto ranges = ShardByteRanges(**file, *plan, w);
    ASSERT_TRUE(ranges.ok());
    std::string share;
    for (const auto& e : std::filesystem::directory_iterator(dir.Sub("stream" + std::to_string(w)))) {
      if (e.path().extension() == ".gguf") share = e.path().string();
    }
    ASSERT_FALSE(share.empty());
    const double share_mib = TotalBytes(*ranges) / 1048576.0;
    const double stored_mib = AllocatedBytes(share) / 1048576.0;
    const double peak_mib = PeakMiB(without.logs[w - 1]);
    std::printf("rank %d: share %.1f MiB, stored %.1f MiB, peak RSS %.1f MiB (with the file: %.1f) "
                "of a %.1f MiB model\n", w, share_mib, stored_mib, peak_mib,
                PeakMiB(with_file.logs[w - 1]), model_mib);
    EXPECT_LE(stored_mib, BlocksTouchedBytes(*ranges) / 1048576.0 + 1);
    EXPECT_LE(stored_mib, 0.6 * model_mib);
    EXPECT_GT(peak_mib, 0);
    EXPECT_LE(peak_mib, 1.1 * model_mib / kRanks + 64);
  }
  std::printf("start with local files %.2f s, streaming the shares %.2f s\n", local_s, streamed_s);
}

}  // namespace
}  // namespace cohort::parallel::testing
