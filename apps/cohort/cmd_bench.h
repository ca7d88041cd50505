// `cohort bench`: llama-bench's pp/tg measurement for cohort — prompt-processing and
// generation tokens/s as medians over repetitions, the bytes of weights each generated token
// reads, the memory bandwidth that implies, and the peak resident memory.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace cohort::app {

struct BenchOptions {
  std::string model;
  int n_prompt = 512;       // pp: one batch of this many tokens (0 skips pp)
  int n_gen = 128;          // tg: this many single-token steps from an empty cache (0 skips tg)
  // pp: prompt tokens per forward pass (llama-bench's -ub). The activations of a pass grow
  // with it; 256 keeps a 1B model's peak RSS within file + KV cache + 10%.
  int n_ubatch = 256;
  int threads = 0;          // 0: all hardware threads
  int reps = 5;             // repetitions; the medians are reported
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
