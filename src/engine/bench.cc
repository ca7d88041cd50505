// The pp/tg benchmark (see bench.h): a fixed-seed random prompt, a warm-up, timed repetitions,
// and the table and JSON that report them.
#include "engine/bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string_view>

#include <fmt/format.h>
#include <fmt/printf.h>

#include "kernels/quant.h"
#include "model/model.h"

namespace cohort::engine {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

double PeakRssBytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) * 1024.0;  // Linux reports KiB
}

// Times forward passes over one sequence slot of `cache`, which each measurement empties first.
struct Runner {
  model::Model* model;
  const Context& ctx;
  model::KvCache* cache;
  std::vector<int32_t> tokens;  // random ids, fixed seed
  std::vector<float> logits;    // [n_vocab]: the last token's only
  model::Batch batch;

  double Seconds(uint64_t start_ns) const {
    return static_cast<double>(ctx.clock->MonotonicNs() - start_ns) / 1e9;
  }

  // One forward pass of n tokens starting at position pos; logits for the last only.
  Status Step(int pos, int n) {
    batch.Clear();
    for (int i = 0; i < n; ++i) {
      batch.Add(tokens[(pos + i) % tokens.size()], pos + i, 0, i == n - 1);
    }
    return model->Forward(ctx, batch, *cache, logits);
  }

  Result<double> Prompt(int n_prompt, int n_ubatch) {
    cache->Truncate(0, 0);
    const uint64_t start = ctx.clock->MonotonicNs();
    for (int pos = 0; pos < n_prompt; pos += n_ubatch) {
      COHORT_RETURN_IF_ERROR(Step(pos, std::min(n_ubatch, n_prompt - pos)));
    }
    return Seconds(start);
  }

  Result<double> Generate(int n_gen) {
    cache->Truncate(0, 0);
    const uint64_t start = ctx.clock->MonotonicNs();
    for (int i = 0; i < n_gen; ++i) COHORT_RETURN_IF_ERROR(Step(i, 1));
    return Seconds(start);
  }
};

std::string JoinRuns(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += fmt::format("{}{:.3f}", s.empty() ? "" : ",", x);
  return "[" + s + "]";
}

}  // namespace

Status BenchSpec::Validate() const {
  if (n_prompt < 0 || n_gen < 0) return InvalidArgument("n_prompt and n_gen must not be negative");
  if (n_prompt == 0 && n_gen == 0) return InvalidArgument("n_prompt and n_gen are both 0: nothing to measure");
  if (n_ubatch < 1 || reps < 1) return InvalidArgument("n_ubatch and reps must be at least 1");
  if (kv_type != DType::kF32 && kv_type != DType::kF16) return InvalidArgument("the KV cache is f32 or f16");
  return Status::Ok();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

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

Result<BenchResult> RunBench(const BenchSpec& spec, const Context& ctx) {
  COHORT_RETURN_IF_ERROR(spec.Validate());
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<gguf::File> file, gguf::File::Open(spec.model));
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> model, model::Model::Load(*file));
  // As `cohort run` and `cohort serve` load a whole model: the weights in the kernels' layout.
  COHORT_RETURN_IF_ERROR(model->PackWeights().status());
  const model::ModelConfig& config = model->config();

  model::KvCacheOptions kv;
  kv.n_ctx = std::max(1, spec.n_prompt + spec.n_gen);
  kv.type = spec.kv_type;
  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<model::KvCache> cache, model->NewKvCache(kv));

  Runner run{model.get(), ctx, cache.get(), {}, {}, {}};
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, config.n_vocab - 1);
  run.tokens.resize(static_cast<size_t>(std::max(spec.n_prompt, spec.n_gen)));
  for (int32_t& t : run.tokens) t = token(rng);
  run.logits.resize(config.n_vocab);

  // Warm-up (as llama-bench): pages the weights in and wakes the threads. A short prompt does
  // it; the full one would double the run time on a slow machine.
  if (spec.n_prompt > 0) COHORT_RETURN_IF_ERROR(run.Prompt(std::min(spec.n_prompt, 32), spec.n_ubatch).status());
  if (spec.n_gen > 0) COHORT_RETURN_IF_ERROR(run.Generate(1).status());

  BenchResult r;
  for (int rep = 0; rep < spec.reps; ++rep) {
    if (spec.n_prompt > 0) {
      COHORT_ASSIGN_OR_RETURN(double seconds, run.Prompt(spec.n_prompt, spec.n_ubatch));
      r.pp_runs.push_back(spec.n_prompt / seconds);
    }
    if (spec.n_gen > 0) {
      COHORT_ASSIGN_OR_RETURN(double seconds, run.Generate(spec.n_gen));
      r.tg_runs.push_back(spec.n_gen / seconds);
    }
  }
  r.arch_name = config.name;
  r.n_layer = config.n_layer;
  r.n_embd = config.n_embd;
  r.threads = ctx.pool->size();
  r.simd = kernels::SimdLevelName(kernels::BestSimdLevel());
  r.pp_tokens_per_s = Median(r.pp_runs);
  r.tg_tokens_per_s = Median(r.tg_runs);
  r.weight_bytes_per_token = WeightBytesPerToken(*file, config);
  r.file_bytes = static_cast<double>(file->file_size());
  r.kv_bytes = static_cast<double>(cache->bytes());
  r.peak_rss_bytes = PeakRssBytes();
  return r;
}

std::string FormatBenchTable(const BenchSpec& s, const BenchResult& r) {
  std::string out = fmt::sprintf("model %s  (%s, %d layers, n_embd %d)\n", s.model, r.arch_name, r.n_layer, r.n_embd);
  out += fmt::sprintf("threads %d  simd %s  reps %d  kv %s  ubatch %d\n", r.threads, r.simd, s.reps,
                      std::string(DTypeName(s.kv_type)), s.n_ubatch);
  if (s.n_prompt > 0) out += fmt::sprintf("pp%-5d %10.2f tok/s (median)\n", s.n_prompt, r.pp_tokens_per_s);
  if (s.n_gen > 0) {
    out += fmt::sprintf("tg%-5d %10.2f tok/s (median)\n", s.n_gen, r.tg_tokens_per_s);
    out += fmt::sprintf("weights read per token %.1f MiB -> effective bandwidth %.2f GB/s\n",
                        r.weight_bytes_per_token / (1 << 20), r.effective_bandwidth_Bps() / 1e9);
  }
  const double expected = r.file_bytes + r.kv_bytes;
  out += fmt::sprintf("peak RSS %.1f MiB (file %.1f MiB + KV %.1f MiB = %.1f MiB; ratio %.3f)\n",
                      r.peak_rss_bytes / (1 << 20), r.file_bytes / (1 << 20), r.kv_bytes / (1 << 20),
                      expected / (1 << 20), r.peak_rss_bytes / expected);
  return out;
}

std::string FormatBenchJson(const BenchSpec& s, const BenchResult& r) {
  return fmt::sprintf(
      "{\"model\":\"%s\",\"threads\":%d,\"simd\":\"%s\",\"reps\":%d,\"n_prompt\":%d,\"n_gen\":%d,\"n_ubatch\":%d,"
      "\"pp_tokens_per_s\":%.3f,\"tg_tokens_per_s\":%.3f,\"pp_runs\":%s,\"tg_runs\":%s,"
      "\"weight_bytes_per_token\":%.0f,\"effective_bandwidth_gb_s\":%.3f,"
      "\"peak_rss_bytes\":%.0f,\"file_bytes\":%.0f,\"kv_bytes\":%.0f}\n",
      s.model, r.threads, r.simd, s.reps, s.n_prompt, s.n_gen, s.n_ubatch, r.pp_tokens_per_s, r.tg_tokens_per_s,
      JoinRuns(r.pp_runs), JoinRuns(r.tg_runs), r.weight_bytes_per_token, r.effective_bandwidth_Bps() / 1e9,
      r.peak_rss_bytes, r.file_bytes, r.kv_bytes);
}

}  // namespace cohort::engine
