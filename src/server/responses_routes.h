// OpenAI's Responses API (what Codex CLI speaks) on the one generation path, stateless: POST
// /v1/responses, whole or streamed as its named events (response.created, .in_progress,
// .output_item.added, .content_part.added, .output_text.delta, .output_text.done,
// .content_part.done, .output_item.done, then response.completed or response.incomplete).
// A request is translated into an OpenAI chat body: `instructions` a system message, `input`
// (a string, or message, function_call and function_call_output items) the conversation,
// function tools and tool_choice OpenAI chat's, text.format its response_format. Nothing is
// stored: previous_response_id and item references are refused with a 400 naming them.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::server {

class HttpServer;

struct ResponsesTranslation {
  nlohmann::json openai;  // the /v1/chat/completions body
  std::string model;
};

// Checks `body` field by field (kInvalidArgument naming the field) and translates it.
Result<ResponsesTranslation> TranslateResponses(const nlohmann::json& body);

// Adds POST /v1/responses to `server` (borrowed; it outlives it).
void AddResponsesRoutes(HttpServer& server);

}  // namespace cohort::server
