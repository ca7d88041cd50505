// The request log: one line per HTTP request with its route, model, token counts, time to
// first token, generation speed and status, as llama-server writes. A request is served on
// one cpp-httplib worker thread from routing to its last streamed byte, so the handler fills
// the entry of its thread (CurrentRequestLog) and the server's logger hook writes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cohort::server {

struct RequestLogEntry {
  std::chrono::steady_clock::time_point start;
  std::string model;     // the instance that served it ("" before routing)
  std::string upstream;  // the node it was relayed to, if any
  int64_t prompt_tokens = -1;  // -1: not a generation, or it ended before counting
  int64_t cached_tokens = -1;
  int64_t completion_tokens = -1;
  double ttft_s = -1;    // request start to first token; -1: no token
};

// Starts this thread's entry for a new request (the pre-routing hook).
void BeginRequestLog();
// This thread's entry, for the handler to fill.
RequestLogEntry& CurrentRequestLog();
// "POST /v1/chat/completions 200 model=m prompt=12 cached=0 completion=40 ttft_ms=8.1
// tok_s=151.0 ms=272 from=127.0.0.1:40312": the fields an entry has, in a fixed order.
std::string RequestLogLine(const std::string& method, const std::string& path, int status,
                           const std::string& remote, const RequestLogEntry& entry);

}  // namespace cohort::server
