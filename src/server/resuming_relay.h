// A streamed generation on a cluster that survives the loss of a node. The node a client is
// connected to keeps the request and the tokens it has relayed; it sends the request to the
// node serving the instance (itself included, over its own API) and asks for each chunk's
// token ids. When that stream breaks — a rank died and the coordinator ended its requests, or
// the coordinator itself went away — it waits for the instance's next placement (a higher
// epoch) and sends the request again with the tokens generated so far ("cohort_resume"), which
// the serving node appends to the prompt, counting them against max_tokens. The client's
// stream pauses and continues; only when no placement comes (unplaced, or none within the
// wait) does it end with an error event.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "comm/secure_channel.h"
#include "core/status.h"
#include "server/router.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace cohort::server {

// Asks the serving node for each streamed chunk's sampled token ids.
inline constexpr const char* kTokenIdsHeader = "X-Cohort-Token-Ids";
// The request field carrying the tokens generated before a resume: {"tokens": [ids]}.
inline constexpr const char* kResumeField = "cohort_resume";

struct ResumeOptions {
  int read_timeout_s = 30;    // a serving node silent this long is given up on
  int resume_wait_s = 60;     // how long a broken stream waits for the instance's next placement
  int max_resumes = 8;        // resumes of one request at most
  int quiet_ms = 1000;        // as ProxyOptions: silence before the membership is asked
  int poll_ms = 200;
  std::optional<comm::ChannelKey> key;  // as ProxyOptions: the relay channel's
};

// The tokens of `body`'s kResumeField (empty when absent); kInvalidArgument naming the field
// when it is malformed or a token is outside [0, n_vocab).
Result<std::vector<int32_t>> ResumeTokensOf(const nlohmann::json& body, int32_t n_vocab);

// Serves the streamed generation request `req` (its model named `model`) through the node
// serving the instance `router` finds, resuming it as above. Answers like a relay while the
// first placement has not streamed: its status and body when it is not an event stream.
// Borrowed: `router` outlives the server.
void RelayResumable(InstanceRouter& router, const std::string& model, const httplib::Request& req,
                    httplib::Response& res, const ResumeOptions& options);

}  // namespace cohort::server
