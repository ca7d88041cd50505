// ApiClient: the CLI's side of a node's HTTP API (`cohort models`, `ps`, `load`, `unload`,
// `rm`). One JSON call per method, with the API key and bounded timeouts; an error answer
// becomes a Status carrying the server's own message.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::server {

struct ApiClientOptions {
  std::string url = "http://127.0.0.1:8080";  // a node's API
  std::string api_key;                         // "": none sent
  int timeout_s = 30;                          // connect; reads wait this long more than a call's own wait
};

class ApiClient {
 public:
  explicit ApiClient(ApiClientOptions options) : options_(std::move(options)) {}

  // method "GET", "POST" or "DELETE"; `body` is sent as JSON when not null. The parsed
  // answer of a 2xx reply; otherwise the reply's error message (or why none came).
  Result<nlohmann::json> Call(const std::string& method, const std::string& path,
                              const nlohmann::json& body = nullptr, int wait_s = 0) const;

 private:
  ApiClientOptions options_;
};

}  // namespace cohort::server
