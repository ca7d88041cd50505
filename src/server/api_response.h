// OpenAI response bodies: error JSON (and the one place a Status becomes an HTTP code),
// chat and text completions, their streamed chunks, and logprobs in each endpoint's shape.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/generator.h"
#include "engine/scheduler.h"
#include "server/api_request.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace cohort::server {

struct ApiError {
  int http_status = 500;
  std::string message;
  std::string type;   // invalid_request_error, authentication_error, rate_limit_error, ...
  std::string code;   // may be empty
  std::string param;  // may be empty
};

// The one mapping of a Status to its HTTP error (status, OpenAI error type and code).
ApiError HttpErrorOf(const Status& status);
std::string ErrorJson(const ApiError& error);

// Identifies one response in its chunks and its final body.
struct ResponseMeta {
  std::string id;       // "chatcmpl-..." or "cmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
  Endpoint endpoint = Endpoint::kChat;
  bool logprobs = false;
  // Each chunk also carries its sampled token ids ("token_ids" in the choice): asked for by a
  // cluster node relaying a stream, so it can resume it from them (resuming_relay.h).
  bool token_ids = false;
  // Chat with tools: the text is parsed into content, reasoning_content and tool_calls in
  // this format. Streamed, reasoning and content go out as they become final
  // (ToolTextStream) and the calls at the end, since a call is known only whole.
  bool parse_tools = false;
  ToolFormat tool_format = ToolFormat::kHermes;
  bool parallel_tool_calls = true;  // false: only the first call is returned
  bool opens_think = false;         // the prompt opened <think>: the text starts as reasoning
  // The choice (OpenAI's n) the streamed chunks written with this meta belong to: their
  // "index". Every choice of a response shares the id, created and model.
  int32_t choice = 0;
};

// "stop" for a stop string or an end-of-generation token, "length" for a limit.
const char* OpenAiFinishReason(engine::FinishReason reason);

// The parse of a finished chat-with-tools text in meta's format, its call ids unique to this
// response, cut to the first call when parallel_tool_calls is false. Every dialect that
// writes tool calls reads them from here.
AssistantOutput ParseToolOutput(const ResponseMeta& meta, std::string_view text);

// The whole non-streamed response for a finished request.
std::string CompletionJson(const ResponseMeta& meta, const engine::RequestOutput& output,
                           const tokenizer::Tokenizer& tok);

// One SSE event ("data: {...}\n\n") carrying new text (and its tokens' logprobs) for choice
// meta.choice; `first` adds the assistant role (chat). finish_reason is set when `output.done`.
std::string ChunkEvent(const ResponseMeta& meta, const engine::RequestOutput& output,
                       const tokenizer::Tokenizer& tok, bool first);
// A streamed chat with tools, for choice meta.choice: the chunk of reasoning and content that
// became final with a piece (token_ids too when meta.token_ids), and the end: what of the
// parsed message had not gone out (`unsent` content and reasoning_content, the tool_calls
// with index, id, type, name and empty arguments) as one delta, each call's whole arguments
// as a delta of their own, then the chunk with finish_reason ("tool_calls" when there are calls).
std::string ToolDeltaEvent(const ResponseMeta& meta, const ToolTextStream::Delta& delta, const std::vector<int32_t>& tokens);
std::string ToolChunkEvents(const ResponseMeta& meta, const engine::RequestOutput& output,
                            const ToolTextStream::Delta& unsent);
// The usage-only chunk of stream_options.include_usage.
std::string UsageEvent(const ResponseMeta& meta, int32_t prompt_tokens, int32_t completion_tokens,
                       int32_t cached_tokens = 0);
// An error while streaming (the status line is already sent).
std::string ErrorEvent(const ApiError& error);

}  // namespace cohort::server
