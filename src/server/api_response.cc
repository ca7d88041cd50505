// Builds OpenAI's JSON shapes with nlohmann::json. Token strings may hold partial UTF-8 (byte
// tokens), so they are sanitized for JSON and their raw bytes are given in "bytes".
#include "server/api_response.h"

#include <nlohmann/json.hpp>

#include "tokenizer/utf8.h"

namespace cohort::server {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string TokenText(const tokenizer::Tokenizer& tok, int32_t id) {
  std::string clean;
  tokenizer::AppendSanitizedUtf8(tok.TokenToPiece(id, false), clean);
  return clean;
}

json TokenBytes(const tokenizer::Tokenizer& tok, int32_t id) {
  json bytes = json::array();
  for (unsigned char c : tok.TokenToPiece(id, false)) bytes.push_back(static_cast<int>(c));
  return bytes;
}

json ChatLogprobs(const engine::RequestOutput& out, const tokenizer::Tokenizer& tok) {
  json content = json::array();
  for (const engine::Logprobs& lp : out.logprobs) {
    json top = json::array();
    for (const engine::TokenLogprob& t : lp.top) {
      top.push_back({{"token", TokenText(tok, t.token)}, {"logprob", t.logprob}, {"bytes", TokenBytes(tok, t.token)}});
    }
    content.push_back({{"token", TokenText(tok, lp.chosen.token)},
                       {"logprob", lp.chosen.logprob},
                       {"bytes", TokenBytes(tok, lp.chosen.token)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}};
}

json CompletionLogprobs(const engine::RequestOutput& out, const tokenizer::Tokenizer& tok) {
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  for (const engine::Logprobs& lp : out.logprobs) {
    tokens.push_back(TokenText(tok, lp.chosen.token));
    token_logprobs.push_back(lp.chosen.logprob);
    json top = json::object();
    for (const engine::TokenLogprob& t : lp.top) top[TokenText(tok, t.token)] = t.logprob;
    top_logprobs.push_back(std::move(top));
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(token_logprobs)},
          {"top_logprobs", std::move(top_logprobs)}};
}

// prompt_tokens_details.cached_tokens as OpenAI reports it: prompt tokens served from the
// prefix cache instead of computed.
json Usage(int32_t prompt_tokens, int32_t completion_tokens, int32_t cached_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

json Logprobs(const ResponseMeta& meta, const engine::RequestOutput& out, const tokenizer::Tokenizer& tok) {
  if (!meta.logprobs) return nullptr;
  return meta.endpoint == Endpoint::kChat ? ChatLogprobs(out, tok) : CompletionLogprobs(out, tok);
}

json Header(const ResponseMeta& meta, const char* object) {
  return {{"id", meta.id}, {"object", object}, {"created", meta.created}, {"model", meta.model}};
}

// The parsed assistant message for a chat with tools, and its finish_reason.
json ToolMessage(const ResponseMeta& meta, const engine::RequestOutput& out, bool delta, const char** finish) {
  AssistantOutput parsed = ParseToolOutput(meta, out.text);
  json message = json::object();
  if (!delta) message["role"] = "assistant";
  if (!parsed.content.empty() || !delta) {
    message["content"] = parsed.content.empty() && !parsed.tool_calls.empty() ? json(nullptr) : json(parsed.content);
  }
  if (!parsed.reasoning.empty()) message["reasoning_content"] = parsed.reasoning;
  *finish = OpenAiFinishReason(out.finish_reason);
  if (parsed.tool_calls.empty()) return message;
  json calls = json::array();
  for (size_t i = 0; i < parsed.tool_calls.size(); ++i) {
    const ParsedToolCall& call = parsed.tool_calls[i];
    json c = {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
    if (delta) c["index"] = i;
    calls.push_back(std::move(c));
  }
  message["tool_calls"] = std::move(calls);
  // A call cut off by max_tokens is still "length"; a complete one ends the turn.
  if (out.finish_reason != engine::FinishReason::kLength) *finish = "tool_calls";
  return message;
}

}  // namespace

AssistantOutput ParseToolOutput(const ResponseMeta& meta, std::string_view text) {
  const size_t dash = meta.id.find_first_of("-_");
  const std::string opened = meta.opens_think ? "<think>" + std::string(text) : std::string(text);
  AssistantOutput parsed = ParseAssistantOutput(meta.tool_format, opened, meta.id.substr(dash == std::string::npos ? 0 : dash + 1));
  if (!meta.parallel_tool_calls && parsed.tool_calls.size() > 1) parsed.tool_calls.resize(1);
  return parsed;
}

std::string ToolDeltaEvent(const ResponseMeta& meta, const ToolTextStream::Delta& d, const std::vector<int32_t>& tokens) {
  json delta = json::object();
  if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
  if (!d.content.empty()) delta["content"] = d.content;
  json choice = {{"index", meta.choice}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (meta.token_ids) choice["token_ids"] = tokens;
  json body = Header(meta, "chat.completion.chunk");
  body["choices"] = json::array({std::move(choice)});
  return "data: " + Dump(body) + "\n\n";
}

std::string ToolChunkEvents(const ResponseMeta& meta, const engine::RequestOutput& out, const ToolTextStream::Delta& unsent) {
  const char* finish = "stop";
  json delta = ToolMessage(meta, out, true, &finish);
  delta.erase("content");
  delta.erase("reasoning_content");
  if (!unsent.reasoning.empty()) delta["reasoning_content"] = unsent.reasoning;
  if (!unsent.content.empty()) delta["content"] = unsent.content;
  std::string events;
  auto emit = [&](json d) {
    json body = Header(meta, "chat.completion.chunk");
    body["choices"] = json::array({{{"index", meta.choice}, {"delta", std::move(d)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
    events += "data: " + Dump(body) + "\n\n";
  };
  // As OpenAI streams a call: its index, id, type and name with empty arguments first, then
  // the arguments (here whole, as the parse knows them) under the same index.
  json arguments = json::array();
  if (auto calls = delta.find("tool_calls"); calls != delta.end()) {
    for (json& c : *calls) {
      arguments.push_back({{"index", c["index"]}, {"function", {{"arguments", c["function"]["arguments"]}}}});
      c["function"]["arguments"] = "";
    }
  }
  if (!delta.empty()) emit(std::move(delta));
  for (json& a : arguments) emit({{"tool_calls", json::array({std::move(a)})}});
  json last = Header(meta, "chat.completion.chunk");
  last["choices"] = json::array({{{"index", meta.choice}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", finish}}});
  return events + "data: " + Dump(last) + "\n\n";
}

ApiError HttpErrorOf(const Status& status) {
  ApiError e;
  e.message = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kUnsupported:
      e.http_status = 400;
      e.type = "invalid_request_error";
      break;
    case StatusCode::kOutOfRange:
      e.http_status = 400;
      e.type = "invalid_request_error";
      e.code = "context_length_exceeded";
      break;
    case StatusCode::kNotFound:
      e.http_status = 404;
      e.type = "invalid_request_error";
      e.code = "not_found";
      break;
    case StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kCancelled:
      e.http_status = 503;
      e.type = "server_error";
      e.code = "unavailable";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  // Parse errors say "param: why"; OpenAI reports the parameter separately as well.
  const size_t colon = e.message.find(": ");
  if (e.http_status == 400 && colon != std::string::npos && colon < 64 &&
      e.message.find(' ') >= colon) {
    e.param = e.message.substr(0, colon);
  }
  return e;
}

std::string ErrorJson(const ApiError& error) {
  json body = {{"message", error.message},
               {"type", error.type},
               {"param", error.param.empty() ? json(nullptr) : json(error.param)},
               {"code", error.code.empty() ? json(nullptr) : json(error.code)}};
  return Dump({{"error", std::move(body)}});
}

const char* OpenAiFinishReason(engine::FinishReason reason) {
  return reason == engine::FinishReason::kLength ? "length" : "stop";
}

std::string CompletionJson(const ResponseMeta& meta, const engine::RequestOutput& out,
                           const tokenizer::Tokenizer& tok) {
  json choice = {{"index", 0}, {"logprobs", Logprobs(meta, out, tok)},
                 {"finish_reason", OpenAiFinishReason(out.finish_reason)}};
  json body;
  if (meta.endpoint == Endpoint::kChat) {
    body = Header(meta, "chat.completion");
    if (meta.parse_tools) {
      const char* finish = "stop";
      choice["message"] = ToolMessage(meta, out, false, &finish);
      choice["finish_reason"] = finish;
    } else {
      choice["message"] = {{"role", "assistant"}, {"content", out.text}};
    }
  } else {
    body = Header(meta, "text_completion");
    choice["text"] = out.text;
  }
  body["choices"] = json::array({std::move(choice)});
  body["usage"] = Usage(out.prompt_tokens, out.completion_tokens, out.cached_tokens);
  return Dump(body);
}

std::string ChunkEvent(const ResponseMeta& meta, const engine::RequestOutput& out,
                       const tokenizer::Tokenizer& tok, bool first) {
  json choice = {{"index", meta.choice}, {"logprobs", Logprobs(meta, out, tok)},
                 {"finish_reason", out.done ? json(OpenAiFinishReason(out.finish_reason)) : json(nullptr)}};
  json body;
  if (meta.endpoint == Endpoint::kChat) {
    body = Header(meta, "chat.completion.chunk");
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    if (!out.text.empty() || first) delta["content"] = out.text;
    choice["delta"] = std::move(delta);
  } else {
    body = Header(meta, "text_completion");
    choice["text"] = out.text;
  }
  if (meta.token_ids) choice["token_ids"] = out.tokens;
  body["choices"] = json::array({std::move(choice)});
  return "data: " + Dump(body) + "\n\n";
}

std::string UsageEvent(const ResponseMeta& meta, int32_t prompt_tokens, int32_t completion_tokens,
                       int32_t cached_tokens) {
  json body = Header(meta, meta.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array();
  body["usage"] = Usage(prompt_tokens, completion_tokens, cached_tokens);
  return "data: " + Dump(body) + "\n\n";
}

std::string ErrorEvent(const ApiError& error) { return "data: " + ErrorJson(error) + "\n\n"; }

}  // namespace cohort::server
