// Anthropic's Messages API on the one generation path: POST /v1/messages (whole, or streamed
// as Anthropic's named events message_start, content_block_start/delta/stop, message_delta,
// message_stop) and POST /v1/messages/count_tokens. A request is translated into an OpenAI
// chat body: `system` becomes a system message; content blocks text stay text, tool_use
// becomes the assistant message's `tool_calls`, tool_result a role "tool" message (with
// `tool_call_id`); `tools` become OpenAI function tools and `tool_choice` OpenAI's. That
// OpenAI body is the seam to the tool work of issue 22: the chat path renders and parses
// tools in OpenAI's shape, so these arrive there as an OpenAI client's would. Errors are in
// Anthropic's shape, {"type": "error", "error": {"type": ..., "message": "field: why"}}.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::server {

class HttpServer;

struct AnthropicTranslation {
  nlohmann::json openai;  // the /v1/chat/completions body
  std::string model;
  int32_t top_k = -1;     // top_k when given (OpenAI's body has no such field)
};

// Checks `body` field by field (kInvalidArgument naming the Anthropic field) and translates
// it. `count_only`: a count_tokens body, which has no max_tokens.
Result<AnthropicTranslation> TranslateAnthropic(const nlohmann::json& body, bool count_only);

// Adds POST /v1/messages and /v1/messages/count_tokens to `server` (borrowed; it outlives them).
void AddAnthropicRoutes(HttpServer& server);

}  // namespace cohort::server
