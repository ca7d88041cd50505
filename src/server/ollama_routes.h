// Ollama's API on the same port, on the one generation path: POST /api/chat and /api/generate
// (streamed by default as newline-delimited JSON, as Ollama does; options temperature, top_p,
// top_k, min_p, num_predict, seed, stop, num_ctx, repeat_penalty, repeat_last_n and the
// penalties), GET /api/tags, GET /api/ps, POST /api/show, GET /api/version. A chat or generate
// request is translated into an OpenAI chat (generate with raw: a completion) body; `tools`
// pass through in OpenAI's shape, which Ollama's already is, and a `format` becomes OpenAI's
// response_format. Errors are in Ollama's shape, {"error": "field: why"}. num_ctx cannot
// grow a slot (its context is the server's --ctx): it bounds the request's new tokens.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "server/api_request.h"

namespace cohort::server {

class HttpServer;

struct OllamaTranslation {
  Endpoint endpoint = Endpoint::kChat;
  nlohmann::json openai;  // the OpenAI body
  std::string model;
  // Options OpenAI's body cannot carry (-1 / NaN: not given).
  int32_t top_k = -1;
  int32_t repeat_last_n = -2;
  int64_t num_ctx = -1;
  double min_p = -1.0;
  double repeat_penalty = -1.0;
};

// Checks an /api/chat (`chat`) or /api/generate body field by field (kInvalidArgument naming
// the field) and translates it.
Result<OllamaTranslation> TranslateOllama(const nlohmann::json& body, bool chat);

// Adds Ollama's routes to `server` (borrowed; it outlives them).
void AddOllamaRoutes(HttpServer& server);

}  // namespace cohort::server
