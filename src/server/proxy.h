// Relaying an API request to the node that serves its instance: plain answers whole with their
// status, event streams chunk by chunk as they arrive. A node that cannot be reached, or that
// the membership gives up on before it answers, gives 503; one that goes away mid-stream
// gives an SSE error event and the end of the stream. The relayed request carries
// kRelayedHeader, so the node it reaches serves it itself or refuses it, never relays it on.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "comm/secure_channel.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace cohort::server {

inline constexpr const char* kRelayedHeader = "X-Cohort-Relayed";

struct ProxyOptions {
  int read_timeout_s = 30;  // an upstream silent this long ends the request
  // Why the upstream should be given up on ("" while the membership sees it alive): asked
  // every poll_ms once nothing came from it for quiet_ms. Unset: only the timeout.
  std::function<std::string()> upstream_lost;
  int quiet_ms = 1000;
  int poll_ms = 200;
  // The cluster's key: the request goes over the relay channel (relay_channel.h); unset:
  // plain HTTP.
  std::optional<comm::ChannelKey> key;
};

// Relays `req` to `upstream` (host:port) and its answer into `res`.
void ForwardRequest(const std::string& upstream, const httplib::Request& req, httplib::Response& res,
                    const ProxyOptions& options);

}  // namespace cohort::server
