// `cohort bench`: loads a GGUF, then times, per repetition, one prompt batch of n_prompt
// random tokens on an empty cache (pp) and n_gen single-token forward passes from an empty
// cache (tg), as llama-bench does. Reports medians, weight bytes per token, the bandwidth
// that implies, and peak RSS against the file + KV-cache size.
#include "cmd_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "comm/comm_bench.h"
#include "core/context.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "gguf/gguf.h"
#include "model/model.h"

namespace cohort::app {
namespace {

using Clock = std::chrono::steady_clock;

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort bench: %s\n", status.ToString().c_str());
  return 1;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Bytes of weights one generated token reads: every matrix once, except that the token
// embedding contributes one row (unless it doubles as the output matrix) and a MoE layer's
// expert tensors contribute only the n_expert_used of n_expert experts a token is routed to.
double WeightBytesPerToken(const gguf::File& file, const model::ModelConfig& config) {
  const bool tied = file.FindTensor("output.weight") == nullptr;
  double bytes = 0.0;
  for (const gguf::TensorInfo& t : file.tensors()) {
    const double n = static_cast<double>(t.n_bytes);
    if (t.name == "token_embd.weight") {
      bytes += tied ? n : n / static_cast<double>(std::max<int64_t>(1, t.n_rows()));
    } else if (t.name.find("_exps.") != std::string::npos && config.moe.n_expert > 0) {
      bytes += n * config.moe.n_expert_used / config.moe.n_expert;
    } else if (EndsWith(t.name, ".weight") || EndsWith(t.name, ".bias")) {
      bytes += n;
    }
  }
  return bytes;
}

double PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

struct Runner {
  model::Model* model;
  Context ctx;
  model::KvCache* cache;
  std::vector<int32_t> tokens;  // random ids, fixed seed
  std::vector<float> logits;

  // One forward pass of n tokens starting at position pos; logits for the last only.
  Status Step(int pos, int n, model::Batch& batch) {
    batch.Clear();
    for (int i = 0; i < n; ++i) {
      batch.Add(tokens[(pos + i) % tokens.size()], pos + i, 0, i == n - 1);
    }
    return model->Forward(ctx, batch, *cache, logits);
  }

  Result<double> Prompt(int n_prompt, int n_ubatch, model::Batch& batch) {
    cache->Truncate(0, 0);
    const auto start = Clock::now();
    for (int pos = 0; pos < n_prompt; pos += n_ubatch) {
      COHORT_RETURN_IF_ERROR(Step(pos, std::min(n_ubatch, n_prompt - pos), batch));
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  Result<double> Generate(int n_gen, model::Batch& batch) {
    cache->Truncate(0, 0);
    const auto start = Clock::now();
    for (int i = 0; i < n_gen; ++i) COHORT_RETURN_IF_ERROR(Step(i, 1, batch));
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
};

struct Figures {
  double pp_tokens_per_s = 0, tg_tokens_per_s = 0;
  std::vector<double> pp_runs, tg_runs;  // tokens/s of each repetition
  double weight_bytes_per_token = 0, file_bytes = 0, kv_bytes = 0, peak_rss_bytes = 0;
};

void PrintTable(const BenchOptions& o, const model::ModelConfig& c, int threads, const Figures& f) {
  std::printf("model %s  (%s, %d layers, n_embd %d)\n", o.model.c_str(), c.name.c_str(),
              c.n_layer, c.n_embd);
  std::printf("threads %d  reps %d  kv %s  ubatch %d\n", threads, o.reps, o.kv_type.c_str(), o.n_ubatch);
  if (o.n_prompt > 0) std::printf("pp%-5d %10.2f tok/s (median)\n", o.n_prompt, f.pp_tokens_per_s);
  if (o.n_gen > 0) {
    std::printf("tg%-5d %10.2f tok/s (median)\n", o.n_gen, f.tg_tokens_per_s);
    std::printf("weights read per token %.1f MiB -> effective bandwidth %.2f GB/s\n",
                f.weight_bytes_per_token / (1 << 20),
                f.weight_bytes_per_token * f.tg_tokens_per_s / 1e9);
  }
  std::printf("peak RSS %.1f MiB (file %.1f MiB + KV %.1f MiB = %.1f MiB; ratio %.3f)\n",
              f.peak_rss_bytes / (1 << 20), f.file_bytes / (1 << 20), f.kv_bytes / (1 << 20),
              (f.file_bytes + f.kv_bytes) / (1 << 20),
              f.peak_rss_bytes / (f.file_bytes + f.kv_bytes));
}

std::string JoinRuns(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : ",", x);
  return "[" + s + "]";
}

void PrintJson(const BenchOptions& o, int threads, const Figures& f) {
  std::printf(
      "{\"model\":\"%s\",\"threads\":%d,\"reps\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"n_ubatch\":%d,"
      "\"pp_tokens_per_s\":%.3f,\"tg_tokens_per_s\":%.3f,\"pp_runs\":%s,\"tg_runs\":%s,"
      "\"weight_bytes_per_token\":%.0f,\"effective_bandwidth_gb_s\":%.3f,"
      "\"peak_rss_bytes\":%.0f,\"file_bytes\":%.0f,\"kv_bytes\":%.0f}\n",
      o.model.c_str(), threads, o.reps, o.n_prompt, o.n_gen, o.n_ubatch, f.pp_tokens_per_s,
      f.tg_tokens_per_s, JoinRuns(f.pp_runs).c_str(), JoinRuns(f.tg_runs).c_str(),
      f.weight_bytes_per_token, f.weight_bytes_per_token * f.tg_tokens_per_s / 1e9,
      f.peak_rss_bytes, f.file_bytes, f.kv_bytes);
}

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* o) {
  CLI::App* cmd = app.add_subcommand("bench", "measure prompt and generation tokens/s (as llama-bench)");
  cmd->add_option("-m,--model", o->model, "GGUF model file (not with --comm)");
  cmd->add_flag("--comm", o->comm, "benchmark collectives: all-reduce vs raw exchange over tcp, shm, ucx");
  cmd->add_option("--comm-bytes", o->comm_bytes, "--comm message size in bytes (multiple of 4)")
      ->check(CLI::Range(4, 1 << 26));
  cmd->add_option("--comm-iterations", o->comm_iterations, "--comm timed iterations")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens (0 skips pp)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens (0 skips tg)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-u,--ubatch", o->n_ubatch, "prompt tokens per forward pass")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-t,--threads", o->threads, "threads (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("-r,--reps", o->reps, "repetitions (medians are reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16 (as llama-bench) or f32")
      ->check(CLI::IsMember({"f32", "f16"}));
  cmd->add_flag("--json", o->json, "print one JSON object");
  return cmd;
}

namespace {
// Runs before any thread exists: the benchmark forks its second rank.
int CommBenchCommand(const BenchOptions& o) {
  comm::CommBenchOptions options;
  options.message_bytes = static_cast<size_t>(o.comm_bytes);
  options.iterations = o.comm_iterations;
  options.warmup = std::max(1, o.comm_iterations / 10);
  std::string report;
  Status status = comm::RunCommBenchmark(options, &report);
  std::fputs(report.c_str(), stdout);
  if (!status.ok()) return Fail(status);
  return 0;
}
}  // namespace

int BenchCommand(const BenchOptions& o) {
  if (o.comm) return CommBenchCommand(o);
  if (o.model.empty()) return Fail(InvalidArgument("--model is required (or --comm)"));
  if (o.n_prompt == 0 && o.n_gen == 0) return Fail(InvalidArgument("-p 0 and -n 0: nothing to measure"));
  auto file = gguf::File::Open(o.model);
  if (!file.ok()) return Fail(file.status());
  auto model = model::Model::Load(**file);
  if (!model.ok()) return Fail(model.status());
  // As `cohort run` and `cohort serve` load a whole model: the weights in the kernels' layout.
  if (auto packed = (*model)->PackWeights(); !packed.ok()) return Fail(packed.status());
  const model::ModelConfig& config = (*model)->config();

  model::KvCacheOptions kv;
  kv.n_ctx = std::max(1, o.n_prompt + o.n_gen);
  kv.type = o.kv_type == "f16" ? DType::kF16 : DType::kF32;
  auto cache = (*model)->NewKvCache(kv);
  if (!cache.ok()) return Fail(cache.status());

  const int threads = o.threads > 0 ? o.threads : DefaultThreads();
  ThreadPool pool(threads);
  Logger log(LogLevel::kWarn);
  Runner run{model->get(), Context{&pool, &log}, cache->get(), {}, {}};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, config.n_vocab - 1);
  run.tokens.resize(static_cast<size_t>(std::max(o.n_prompt, o.n_gen)));
  for (int32_t& t : run.tokens) t = token(rng);
  run.logits.resize(config.n_vocab);
  model::Batch batch;

  // Warm-up (as llama-bench): pages the weights in and wakes the threads. A short prompt does
  // it; the full one would double the run time on a slow machine.
  if (o.n_prompt > 0) {
    auto s = run.Prompt(std::min(o.n_prompt, 32), o.n_ubatch, batch);
    if (!s.ok()) return Fail(s.status());
  }
  if (o.n_gen > 0) {
    auto s = run.Generate(1, batch);
    if (!s.ok()) return Fail(s.status());
  }

  Figures f;
  for (int r = 0; r < o.reps; ++r) {
    if (o.n_prompt > 0) {
      auto s = run.Prompt(o.n_prompt, o.n_ubatch, batch);
      if (!s.ok()) return Fail(s.status());
      f.pp_runs.push_back(o.n_prompt / *s);
    }
    if (o.n_gen > 0) {
      auto s = run.Generate(o.n_gen, batch);
      if (!s.ok()) return Fail(s.status());
      f.tg_runs.push_back(o.n_gen / *s);
    }
  }
  f.pp_tokens_per_s = Median(f.pp_runs);
  f.tg_tokens_per_s = Median(f.tg_runs);
  f.weight_bytes_per_token = WeightBytesPerToken(**file, config);
  f.file_bytes = static_cast<double>((*file)->file_size());
  f.kv_bytes = static_cast<double>((*cache)->bytes());
  f.peak_rss_bytes = PeakRssBytes();
  if (o.json) {
    PrintJson(o, threads, f);
  } else {
    PrintTable(o, config, threads, f);
  }
  return 0;
}

}  // namespace cohort::app
