// The request log's per-thread entry and its line; see request_log.h.
#include "server/request_log.h"

#include <fmt/format.h>

namespace cohort::server {
namespace {

thread_local RequestLogEntry t_entry;

}  // namespace

void BeginRequestLog() {
  t_entry = RequestLogEntry{};
  t_entry.start = std::chrono::steady_clock::now();
}

RequestLogEntry& CurrentRequestLog() { return t_entry; }

std::string RequestLogLine(const std::string& method, const std::string& path, int status,
                           const std::string& remote, const RequestLogEntry& e) {
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - e.start).count();
  std::string line = fmt::format("{} {} {}", method, path, status);
  if (!e.model.empty()) line += fmt::format(" model={}", e.model);
  if (!e.upstream.empty()) line += fmt::format(" relayed_to={}", e.upstream);
  if (e.prompt_tokens >= 0) line += fmt::format(" prompt={}", e.prompt_tokens);
  if (e.cached_tokens >= 0) line += fmt::format(" cached={}", e.cached_tokens);
  if (e.completion_tokens >= 0) line += fmt::format(" completion={}", e.completion_tokens);
  if (e.ttft_s >= 0) {
    line += fmt::format(" ttft_ms={:.1f}", e.ttft_s * 1e3);
    // Generation speed after the first token: what a reader of a stream sees.
    const double gen_s = total_s - e.ttft_s;
    if (e.completion_tokens > 1 && gen_s > 0) {
      line += fmt::format(" tok_s={:.1f}", static_cast<double>(e.completion_tokens - 1) / gen_s);
    }
  }
  line += fmt::format(" ms={:.0f} from={}", total_s * 1e3, remote);
  return line;
}

}  // namespace cohort::server
