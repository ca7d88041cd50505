// `cohort bench`: parses the options, runs the pp/tg benchmark (engine/bench.h) or, with
// --comm, the collective benchmark (comm/comm_bench.h), and prints the report.
#include "cmd_bench.h"

#include <algorithm>
#include <cstdio>

#include "commands.h"
#include "comm/comm_bench.h"
#include "core/context.h"
#include "core/log.h"
#include "core/thread_pool.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort bench: %s\n", status.ToString().c_str());
  return 1;
}

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

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* o) {
  engine::BenchSpec* s = &o->spec;
  CLI::App* cmd = app.add_subcommand("bench", "measure prompt and generation tokens/s (as llama-bench)");
  cmd->add_option("-m,--model", s->model, "GGUF model file (not with --comm)");
  cmd->add_flag("--comm", o->comm, "benchmark collectives: all-reduce vs raw exchange over tcp, shm, ucx");
  cmd->add_option("--comm-bytes", o->comm_bytes, "--comm message size in bytes (multiple of 4)")
      ->check(CLI::Range(4, 1 << 26));
  cmd->add_option("--comm-iterations", o->comm_iterations, "--comm timed iterations")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("-p,--n-prompt", s->n_prompt, "prompt tokens (0 skips pp)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-n,--n-gen", s->n_gen, "generated tokens (0 skips tg)")->check(CLI::Range(0, 1 << 16));
  cmd->add_option("-u,--ubatch", s->n_ubatch, "prompt tokens per forward pass")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("-t,--threads", o->threads, "threads (default: all cores)")->check(CLI::Range(0, 1024));
  cmd->add_option("-r,--reps", s->reps, "repetitions (medians are reported)")->check(CLI::Range(1, 1000));
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f16 (as llama-bench) or f32")
      ->check(CLI::IsMember({"f32", "f16"}));
  cmd->add_flag("--json", o->json, "print one JSON object");
  return cmd;
}

int BenchCommand(const BenchOptions& o) {
  if (o.comm) return CommBenchCommand(o);
  if (o.spec.model.empty()) return Fail(InvalidArgument("--model is required (or --comm)"));
  if (o.spec.n_prompt == 0 && o.spec.n_gen == 0) {
    return Fail(InvalidArgument("-p 0 and -n 0: nothing to measure"));
  }
  engine::BenchSpec spec = o.spec;
  spec.kv_type = o.kv_type == "f16" ? DType::kF16 : DType::kF32;
  ThreadPool pool(o.threads > 0 ? o.threads : DefaultThreads());
  Logger log(LogLevel::kWarn);
  auto result = engine::RunBench(spec, Context{&pool, &log});
  if (!result.ok()) return Fail(result.status());
  const std::string report = o.json ? engine::FormatBenchJson(spec, *result) : engine::FormatBenchTable(spec, *result);
  std::fputs(report.c_str(), stdout);
  return 0;
}

}  // namespace cohort::app
