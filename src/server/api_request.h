// Parsing and validation of OpenAI request bodies (/v1/chat/completions, /v1/completions)
// into engine options. Every malformed or out-of-range field is a kInvalidArgument naming the
// field, which the server turns into a 400 in OpenAI's error shape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/generator.h"
#include "server/tool_calls.h"
#include "tokenizer/chat_template.h"

namespace cohort::server {

enum class Endpoint { kChat, kCompletion };

// OpenAI's tool_choice: "auto", "none", "required", or {"type": "function", "function":
// {"name": ...}} (kNamed).
enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
inline constexpr int32_t kMaxChoices = 16;  // n

struct ParseLimits {
  int32_t n_vocab = 0;
  int32_t max_tokens_limit = 0;    // largest max_tokens accepted
  int32_t default_max_tokens = 0;  // when the request names none (chat)
  uint64_t default_seed = 0;       // when the request names none
};

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<tokenizer::ChatMessage> messages;  // chat
  std::string prompt;                            // completion: text ...
  std::vector<int32_t> prompt_tokens;            // ... or token ids
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage
  bool logprobs = false;
  bool json_mode = false;          // response_format {"type": "json_object"}
  int32_t n = 1;                   // choices: n generations, seeds seed, seed + 1, ... (streamed interleaved)
  engine::GenerateOptions options; // max_tokens, sampling, stop, top_logprobs, grammar
  // Grammar-constrained output: the `grammar` field (GBNF) or response_format json_schema /
  // json_object, compiled into options.grammar. The GBNF text is kept for the tool grammar.
  std::string grammar_source;
  // OpenAI function tools, validated: each {"type": "function", "function": {"name",
  // "description"?, "parameters"?}}. Other front ends (Anthropic, Responses) map their tools
  // onto this shape. Empty: no tools.
  nlohmann::json tools = nlohmann::json::array();
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;    // kNamed: the function
  bool parallel_tool_calls = true;
  // The rendered prompt ends inside an open <think> (the template opened the reasoning).
  bool opens_think = false;
  ToolFormat tool_format = ToolFormat::kHermes;  // set by the server from the chat template
};

// The parameter a failed parse complains about travels in the message: "param: why".
Result<ApiRequest> ParseApiRequest(Endpoint endpoint, std::string_view body, const ParseLimits& limits);

}  // namespace cohort::server
