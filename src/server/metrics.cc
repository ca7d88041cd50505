// Prometheus text exposition (version 0.0.4): HELP and TYPE lines, then samples.
#include "server/metrics.h"

#include <fmt/format.h>

namespace cohort::server {
namespace {

int64_t SecondOf(Metrics::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

void Family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// A family with one unlabelled sample: the name is written once, so header and sample agree.
template <typename T>
void Single(std::string& out, const char* name, const char* type, const char* help, T value) {
  Family(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

}  // namespace

void Metrics::CountResponse(const std::string& path, int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Unknown paths are folded into one label so a scanner cannot grow the map without bound.
  const bool known = path == "/v1/chat/completions" || path == "/v1/completions" ||
                     path == "/v1/models" || path == "/health" || path == "/metrics";
  ++responses_[{known ? path : "other", status}];
}

void Metrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++ttft_count_;
  ttft_sum_ += seconds;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    if (seconds <= kTtftBuckets[i]) {
      ++ttft_counts_[i];
      break;
    }
  }
}

void Metrics::AddGeneratedTokens(int64_t n, Clock::time_point now) {
  const int64_t second = SecondOf(now);
  const size_t slot = static_cast<size_t>(second % kRing);
  std::lock_guard<std::mutex> lock(mutex_);
  if (second_of_slot_[slot] != second) {
    second_of_slot_[slot] = second;
    tokens_by_second_[slot] = 0;
  }
  tokens_by_second_[slot] += n;
}

double Metrics::TokensPerSecond(Clock::time_point now) const {
  const int64_t second = SecondOf(now);
  int64_t total = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  // The last kWindowSeconds whole seconds (the current one is still filling).
  for (int64_t s = second - kWindowSeconds; s < second; ++s) {
    const size_t slot = static_cast<size_t>(s % kRing);
    if (second_of_slot_[slot] == s) total += tokens_by_second_[slot];
  }
  return static_cast<double>(total) / kWindowSeconds;
}

std::string Metrics::Render(const engine::SchedulerStats& stats) const {
  std::string out;
  const double rate = TokensPerSecond();
  std::lock_guard<std::mutex> lock(mutex_);
  Family(out, "cohort_http_responses_total", "counter", "HTTP responses by path and status.");
  for (const auto& [key, count] : responses_) {
    out += fmt::format("cohort_http_responses_total{{path=\"{}\",status=\"{}\"}} {}\n", key.first, key.second, count);
  }
  Single(out, "cohort_requests_admitted_total", "counter", "Generation requests that got a slot.", stats.requests_admitted);
  Single(out, "cohort_requests_finished_total", "counter", "Generation requests that ended (any reason).", stats.requests_finished);
  Single(out, "cohort_requests_cancelled_total", "counter", "Generations cancelled (client gone).", stats.requests_cancelled);
  Single(out, "cohort_prompt_tokens_total", "counter", "Prompt tokens evaluated.", stats.prompt_tokens);
  Single(out, "cohort_prompt_tokens_cached_total", "counter", "Prompt tokens taken from the prefix cache, not evaluated.",
         stats.prompt_tokens_cached);
  Single(out, "cohort_prefix_cache_bytes", "gauge", "KV rows held by the prefix cache, in bytes.", stats.prefix_cache_bytes);
  Single(out, "cohort_prefix_cache_bytes_max", "gauge", "The prefix cache's budget (--cache-ram; 0: off).",
         stats.prefix_cache_bytes_max);
  Single(out, "cohort_prefix_cache_blocks", "gauge", "Blocks held by the prefix cache.", stats.prefix_cache_blocks);
  Single(out, "cohort_prefix_cache_lookups_total", "counter", "Admitted requests that looked up the prefix cache.",
         stats.prefix_cache_lookups);
  Single(out, "cohort_prefix_cache_hits_total", "counter", "Lookups that found a cached prefix.", stats.prefix_cache_hits);
  {
    const uint64_t prompt_total = stats.prompt_tokens + stats.prompt_tokens_cached;
    Single(out, "cohort_prefix_cache_hit_ratio", "gauge", "Share of prompt tokens taken from the prefix cache.",
           prompt_total > 0 ? static_cast<double>(stats.prompt_tokens_cached) / prompt_total : 0.0);
  }
  Single(out, "cohort_prefill_chunk_tokens", "gauge", "Prompt tokens a step takes beside decoding streams, now.",
         stats.prefill_chunk);
  Single(out, "cohort_generated_tokens_total", "counter", "Tokens generated.", stats.completion_tokens);
  Single(out, "cohort_forward_passes_total", "counter", "Batched forward passes.", stats.forward_passes);
  Single(out, "cohort_generation_tokens_per_second", "gauge", "Tokens generated per second, last 10 s.", rate);
  Single(out, "cohort_queue_depth", "gauge", "Requests waiting for a slot.", stats.queue_depth);
  Single(out, "cohort_slots_active", "gauge", "Sequence slots generating now.", stats.slots_active);
  Single(out, "cohort_slots_total", "gauge", "Sequence slots (--parallel).", stats.slots_total);
  Family(out, "cohort_time_to_first_token_seconds", "histogram", "Request received to first token.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i];
    out += fmt::format("cohort_time_to_first_token_seconds_bucket{{le=\"{}\"}} {}\n", kTtftBuckets[i], cumulative);
  }
  out += fmt::format("cohort_time_to_first_token_seconds_bucket{{le=\"+Inf\"}} {}\n", ttft_count_);
  out += fmt::format("cohort_time_to_first_token_seconds_sum {}\n", ttft_sum_);
  out += fmt::format("cohort_time_to_first_token_seconds_count {}\n", ttft_count_);
  return out;
}

}  // namespace cohort::server
