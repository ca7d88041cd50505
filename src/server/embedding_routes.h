// Embeddings on the one port: OpenAI's POST /v1/embeddings (input a string, strings, token
// ids or lists of them; encoding_format float or base64, as the openai client asks by
// default; dimensions) and Ollama's POST /api/embed (input a string or strings; truncate) and
// its older /api/embeddings (prompt; the vector not normalized, as Ollama leaves it). Each
// input is tokenized as llama-server does (BOS and EOS as the GGUF says, special tokens
// parsed), run through the model by Scheduler::Embed and pooled as the GGUF's pooling_type
// says; a model that names none (a chat model) is pooled by the mean. OpenAI's and /api/embed's
// vectors are normalized to unit length, as both APIs' are. Routed and relayed like a
// generation (HttpServer::LocalOrRelay); a model spread over ranks gives them from its last
// stage (parallel::Executor::ForwardHidden).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/serving.h"

namespace cohort::server {

class HttpServer;

// One input: text, or token ids given as they are.
struct EmbeddingInput {
  std::string text;
  std::vector<int32_t> tokens;
  bool is_tokens = false;
};

struct EmbeddingOptions {
  bool normalize = true;   // to unit (L2) length
  bool truncate = false;   // an input past the context is cut to it (else kOutOfRange)
  int64_t dimensions = 0;  // keep the first this many (then normalized): 0, all of them
  // Asked between inputs: true ends the request (kCancelled), as a client that hung up.
  std::function<bool()> client_gone;
};

// The tokens one request may embed in all (OpenAI's limit): inputs past it are refused before
// any runs.
inline constexpr int64_t kMaxEmbeddingTokens = 300000;

struct Embeddings {
  std::vector<std::vector<float>> vectors;  // one per input, in order
  int64_t prompt_tokens = 0;                // tokens of all inputs
};

// Embeds every input on `instance`, all of them tokenized and checked first (errors name
// "input[i]", "input" or "dimensions").
Result<Embeddings> Embed(engine::ServingInstance& instance, const std::vector<EmbeddingInput>& inputs,
                         const EmbeddingOptions& options);

// Adds /v1/embeddings to `server` (borrowed; it outlives it); Ollama's two are in
// ollama_routes.cc, with Ollama's error shape.
void AddEmbeddingRoutes(HttpServer& server);

}  // namespace cohort::server
