// llama-bench's pp/tg measurement for cohort: per repetition, one prompt of n_prompt random
// tokens on an empty cache (pp) and n_gen single-token forward passes from an empty cache
// (tg); the medians, the bytes of weights each generated token reads, the memory bandwidth
// that implies, and the peak resident memory against the file + KV-cache size. `cohort bench`
// parses the flags and prints what this returns.
#pragma once

#include <string>
#include <vector>

#include "core/context.h"
#include "core/dtype.h"
#include "core/status.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace cohort::engine {

struct BenchSpec {
  std::string model;         // GGUF file
  int n_prompt = 512;        // pp: one prompt of this many tokens (0 skips pp)
  int n_gen = 128;           // tg: this many single-token steps from an empty cache (0 skips tg)
  // pp: prompt tokens per forward pass (llama-bench's -ub). The activations of a pass grow
  // with it; 256 keeps a 1B model's peak RSS within file + KV cache + 10%.
  int n_ubatch = 256;
  int reps = 5;              // repetitions; the medians are reported
  DType kv_type = DType::kF16;  // llama-bench's default cache type
  // n_prompt and n_gen not both 0, n_ubatch and reps at least 1, kv_type f32 or f16.
  Status Validate() const;
};

struct BenchResult {
  std::string arch_name;     // the model config's name
  int n_layer = 0;
  int n_embd = 0;
  int threads = 0;           // the Context's pool size
  std::string simd;          // the SIMD level the kernels ran at (kernels::SimdLevelName)
  double pp_tokens_per_s = 0, tg_tokens_per_s = 0;  // medians; 0 where skipped
  std::vector<double> pp_runs, tg_runs;             // tokens/s of each repetition
  double weight_bytes_per_token = 0;
  double file_bytes = 0, kv_bytes = 0, peak_rss_bytes = 0;
  // What tg's weight reads come to per second, in bytes.
  double effective_bandwidth_Bps() const { return weight_bytes_per_token * tg_tokens_per_s; }
};

// Loads spec.model whole (weights packed for the kernels, as `cohort run` does), warms it up
// and times the repetitions on ctx's thread pool and clock.
Result<BenchResult> RunBench(const BenchSpec& spec, const Context& ctx);

// Bytes of weights one generated token reads: every matrix once, except that the token
// embedding contributes one row (unless it doubles as the output matrix) and a MoE layer's
// expert tensors contribute only the n_expert_used of n_expert experts a token is routed to.
double WeightBytesPerToken(const gguf::File& file, const model::ModelConfig& config);

// The median of v (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v);

// The human-readable table: model, threads, SIMD level, the pp and tg medians, bandwidth,
// peak RSS.
std::string FormatBenchTable(const BenchSpec& spec, const BenchResult& result);
// One JSON object on one line (with a trailing newline), the figures the table shows and each
// repetition's tokens/s.
std::string FormatBenchJson(const BenchSpec& spec, const BenchResult& result);

}  // namespace cohort::engine
