// ServerOptions: the limits and settings of the HTTP front end, a plain aggregate checked by
// Validate(); the command line fills it (apps/cohort/cmd_serve.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/secure_channel.h"
#include "core/status.h"
#include "server/api_keys.h"
#include "server/http_front.h"

namespace cohort::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (Bind() says which)
  std::vector<std::string> api_keys;     // empty (and no key file): no authentication
  std::string api_key_file;              // "NAME KEY" per line (api_keys.h); reloaded by ReloadKeys()
  RateLimit rate_limit;                  // per key (per client address without keys)
  FrontOptions front;                    // listen backlog, request deadline, TLS
  // Browser origins answered with CORS headers and OPTIONS preflights ("*": any); empty: none.
  std::vector<std::string> cors_origins;
  // Paths answered without a key (exact match); every other path, unknown ones included,
  // needs one when keys are set.
  std::vector<std::string> open_paths = {"/health"};
  int relay_timeout_s = 30;              // a node a request was relayed to, silent this long, ends it
  // A cluster node's relay channel (relay_channel.h): with a key, requests are relayed to
  // other nodes over it, and Bind() also listens for theirs at relay_listen (host:port, port
  // 0: any), from the hosts relay_admit_host admits. Without one, relays are plain HTTP.
  std::optional<comm::ChannelKey> relay_key;
  std::string relay_listen;
  // relay_listen is a derived default, not the user's: when its port is taken, Bind() takes
  // any port and warns (the address other nodes use is relay_port(), told through membership).
  bool relay_listen_may_move = false;
  std::function<bool(const std::string& host)> relay_admit_host;
  size_t max_body_bytes = 1 << 20;       // larger request bodies get 413
  int32_t max_prompt_tokens = 0;         // 0: the slot's context minus one
  int32_t max_tokens_limit = 0;          // largest max_tokens accepted (0: the slot's context)
  int32_t default_max_tokens = 0;        // chat default when unset (0: up to the context)
  int http_threads = 64;                 // connections served at once
  int timeout_s = 10;                    // socket read/write timeout (slow clients are cut off)
  // One line per request (request_log.h): every POST and DELETE and every failed GET; a
  // successful GET (a dashboard polling) only at debug level.
  bool request_log = true;
  Status Validate() const {
    if (port < 0 || port > 65535) return InvalidArgument("port must be in [0, 65535]");
    if (max_body_bytes < 1024) return InvalidArgument("max_body_bytes must be >= 1024");
    if (max_prompt_tokens < 0 || max_tokens_limit < 0 || default_max_tokens < 0) {
      return InvalidArgument("token limits must be >= 0");
    }
    if (http_threads < 2 || http_threads > 4096) return InvalidArgument("http_threads must be in [2, 4096]");
    if (timeout_s < 1 || timeout_s > 3600) return InvalidArgument("timeout_s must be in [1, 3600]");
    if (relay_timeout_s < 1 || relay_timeout_s > 3600) return InvalidArgument("relay_timeout_s must be in [1, 3600]");
    if (!relay_listen.empty() && !relay_key.has_value()) return InvalidArgument("a relay listener needs the cluster key");
    COHORT_RETURN_IF_ERROR(front.Validate());
    for (const std::string& key : api_keys) {
      if (key.empty()) return InvalidArgument("an API key must not be empty");
    }
    return Status::Ok();
  }
};

}  // namespace cohort::server
