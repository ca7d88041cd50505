// `cohort bench`: llama-bench's pp/tg measurement for cohort (engine/bench.h) — prompt-
// processing and generation tokens/s as medians over repetitions, the bytes of weights each
// generated token reads, the memory bandwidth that implies, and the peak resident memory —
// or, with --comm, the collective benchmark (comm/comm_bench.h).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/bench.h"

namespace cohort::app {

struct BenchOptions {
  engine::BenchSpec spec;   // model, n_prompt, n_gen, n_ubatch, reps; kv_type from the string
  int threads = 0;          // 0: all hardware threads
  bool json = false;        // one JSON object on stdout instead of the table
  std::string kv_type = "f16";  // llama-bench's default cache type
  // --comm: the collective benchmark instead (all-reduce vs a raw exchange of the same bytes
  // between two processes, over loopback TCP, shared memory and UCX); -m is not needed.
  bool comm = false;
  int comm_bytes = 16 * 1024;
  int comm_iterations = 2000;
};

// Registers the `bench` subcommand on app, filling *options when it is parsed.
CLI::App* AddBenchCommand(CLI::App& app, BenchOptions* options);
// Runs the benchmark; returns the process exit code.
int BenchCommand(const BenchOptions& options);

}  // namespace cohort::app
