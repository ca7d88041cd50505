// Anthropic's Messages API: its request translated into an OpenAI chat body, its answer and
// stream written by AnthropicDialect. See anthropic_routes.h.
#include "server/anthropic_routes.h"

#include <httplib.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/stop.h"
#include "server/dialect.h"
#include "server/dialect_json.h"
#include "server/http_server.h"

namespace cohort::server {
namespace {

using nlohmann::json;
using Type = json::value_t;

constexpr size_t kMaxTools = 512;
constexpr size_t kMaxBlocks = 4096;

// Text of a `system` field or a tool_result's content: a string, or an array of text blocks.
Result<std::string> TextOf(const json& value, const std::string& param) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return FieldError(param, "must be a string or an array of text blocks");
  std::string text;
  for (size_t i = 0; i < value.size(); ++i) {
    const json& block = value[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!block.is_object() || block.value("type", json()) != "text") {
      return FieldError(at, "must be a text block ({\"type\": \"text\", \"text\": ...})");
    }
    COHORT_ASSIGN_OR_RETURN(const json* t, OptionalField(block, "text", at + ".text", Type::string));
    if (t == nullptr) return FieldError(at + ".text", "is required");
    text += t->get<std::string>();
  }
  return text;
}

// One message's content blocks, appended to `out` as OpenAI messages: a user turn's
// tool_result blocks become "tool" messages (before its text), an assistant turn's tool_use
// blocks its tool_calls.
Status TranslateBlocks(const json& blocks, const std::string& role, const std::string& param, json& out) {
  if (blocks.size() > kMaxBlocks) return FieldError(param, "at most " + std::to_string(kMaxBlocks) + " blocks");
  std::string text;
  json tool_calls = json::array();
  for (size_t i = 0; i < blocks.size(); ++i) {
    const json& block = blocks[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!block.is_object()) return FieldError(at, "must be a content block object");
    COHORT_ASSIGN_OR_RETURN(const json* type, OptionalField(block, "type", at + ".type", Type::string));
    if (type == nullptr) return FieldError(at + ".type", "is required");
    const std::string kind = type->get<std::string>();
    if (kind == "text") {
      COHORT_ASSIGN_OR_RETURN(const json* t, OptionalField(block, "text", at + ".text", Type::string));
      if (t == nullptr) return FieldError(at + ".text", "is required");
      text += t->get<std::string>();
    } else if (kind == "tool_use") {
      if (role != "assistant") return FieldError(at, "tool_use blocks belong to assistant messages");
      COHORT_ASSIGN_OR_RETURN(const json* id, OptionalField(block, "id", at + ".id", Type::string));
      COHORT_ASSIGN_OR_RETURN(const json* name, OptionalField(block, "name", at + ".name", Type::string));
      COHORT_ASSIGN_OR_RETURN(const json* input, OptionalField(block, "input", at + ".input", Type::object));
      if (id == nullptr || name == nullptr) return FieldError(at, "a tool_use block needs id and name");
      tool_calls.push_back({{"id", *id}, {"type", "function"},
                            {"function", {{"name", *name}, {"arguments", input ? input->dump() : "{}"}}}});
    } else if (kind == "tool_result") {
      if (role != "user") return FieldError(at, "tool_result blocks belong to user messages");
      COHORT_ASSIGN_OR_RETURN(const json* id, OptionalField(block, "tool_use_id", at + ".tool_use_id", Type::string));
      if (id == nullptr) return FieldError(at + ".tool_use_id", "is required");
      COHORT_ASSIGN_OR_RETURN(const json* is_error, OptionalField(block, "is_error", at + ".is_error", Type::boolean));
      std::string result;
      if (auto c = block.find("content"); c != block.end() && !c->is_null()) {
        COHORT_ASSIGN_OR_RETURN(result, TextOf(*c, at + ".content"));
      }
      if (is_error != nullptr && is_error->get<bool>()) result = "Error: " + result;
      out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result}});
    } else if (kind == "thinking" || kind == "redacted_thinking") {
      // Earlier reasoning is not shown to the model again, as Anthropic's API does.
    } else {
      return FieldError(at + ".type", "'" + kind + "' is not supported (text, tool_use, tool_result)");
    }
  }
  if (role == "assistant") {
    json m = {{"role", "assistant"}, {"content", text}};
    if (!tool_calls.empty()) m["tool_calls"] = std::move(tool_calls);
    out.push_back(std::move(m));
  } else if (!text.empty() || out.empty() || out.back().value("role", "") != "tool") {
    out.push_back({{"role", "user"}, {"content", text}});
  }
  return Status::Ok();
}

Status TranslateMessages(const json& body, json& openai) {
  json messages = json::array();
  if (auto s = body.find("system"); s != body.end() && !s->is_null()) {
    COHORT_ASSIGN_OR_RETURN(std::string system, TextOf(*s, "system"));
    messages.push_back({{"role", "system"}, {"content", system}});
  }
  COHORT_ASSIGN_OR_RETURN(const json* list, OptionalField(body, "messages", "messages", Type::array));
  if (list == nullptr) return FieldError("messages", "is required");
  if (list->empty()) return FieldError("messages", "must not be empty");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return FieldError(at, "must be an object");
    COHORT_ASSIGN_OR_RETURN(const json* role, OptionalField(m, "role", at + ".role", Type::string));
    if (role == nullptr) return FieldError(at + ".role", "is required");
    const std::string r = role->get<std::string>();
    if (r != "user" && r != "assistant") return FieldError(at + ".role", "must be 'user' or 'assistant'");
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) return FieldError(at + ".content", "is required");
    if (content->is_string()) {
      messages.push_back({{"role", r}, {"content", *content}});
    } else if (content->is_array()) {
      COHORT_RETURN_IF_ERROR(TranslateBlocks(*content, r, at + ".content", messages));
    } else {
      return FieldError(at + ".content", "must be a string or an array of content blocks");
    }
  }
  openai["messages"] = std::move(messages);
  return Status::Ok();
}

// Anthropic tools {name, description, input_schema} as OpenAI function tools.
Status TranslateTools(const json& body, json& openai) {
  COHORT_ASSIGN_OR_RETURN(const json* tools, OptionalField(body, "tools", "tools", Type::array));
  if (tools != nullptr) {
    if (tools->size() > kMaxTools) return FieldError("tools", "at most " + std::to_string(kMaxTools) + " tools");
    json functions = json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return FieldError(at, "must be an object");
      COHORT_ASSIGN_OR_RETURN(const json* type, OptionalField(t, "type", at + ".type", Type::string));
      if (type != nullptr && *type != "custom") {
        return FieldError(at + ".type", "server tools ('" + type->get<std::string>() + "') are not supported");
      }
      COHORT_ASSIGN_OR_RETURN(const json* name, OptionalField(t, "name", at + ".name", Type::string));
      COHORT_ASSIGN_OR_RETURN(const json* desc, OptionalField(t, "description", at + ".description", Type::string));
      COHORT_ASSIGN_OR_RETURN(const json* schema, OptionalField(t, "input_schema", at + ".input_schema", Type::object));
      if (name == nullptr || name->get<std::string>().empty()) return FieldError(at + ".name", "is required");
      if (schema == nullptr) return FieldError(at + ".input_schema", "is required");
      json function = {{"name", *name}, {"parameters", *schema}};
      if (desc != nullptr) function["description"] = *desc;
      functions.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    openai["tools"] = std::move(functions);
  }
  COHORT_ASSIGN_OR_RETURN(const json* choice, OptionalField(body, "tool_choice", "tool_choice", Type::object));
  if (choice == nullptr) return Status::Ok();
  const std::string type = choice->value("type", "");
  if (type == "auto" || type == "none") {
    openai["tool_choice"] = type;
  } else if (type == "any") {
    openai["tool_choice"] = "required";
  } else if (type == "tool") {
    COHORT_ASSIGN_OR_RETURN(const json* name, OptionalField(*choice, "name", "tool_choice.name", Type::string));
    if (name == nullptr) return FieldError("tool_choice.name", "is required with type 'tool'");
    openai["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  } else {
    return FieldError("tool_choice.type", "must be auto, any, tool or none");
  }
  COHORT_ASSIGN_OR_RETURN(const json* serial, OptionalField(*choice, "disable_parallel_tool_use",
                                                            "tool_choice.disable_parallel_tool_use", Type::boolean));
  if (serial != nullptr) openai["parallel_tool_calls"] = !serial->get<bool>();
  return Status::Ok();
}

Status TranslateSampling(const json& body, bool count_only, AnthropicTranslation& out) {
  json& openai = out.openai;
  COHORT_ASSIGN_OR_RETURN(const json* max_tokens, OptionalField(body, "max_tokens", "max_tokens", Type::number_integer));
  if (max_tokens == nullptr && !count_only) return FieldError("max_tokens", "is required");
  if (max_tokens != nullptr) openai["max_tokens"] = *max_tokens;  // its range is checked by the chat parse
  COHORT_ASSIGN_OR_RETURN(const json* temperature, OptionalField(body, "temperature", "temperature", Type::number_float));
  if (temperature != nullptr) {
    const double t = temperature->get<double>();
    if (!(t >= 0.0 && t <= 1.0)) return FieldError("temperature", "must be in [0, 1]");
    openai["temperature"] = t;
  }
  for (const char* key : {"top_p", "stream"}) {
    if (auto it = body.find(key); it != body.end()) openai[key] = *it;  // checked by the chat parse
  }
  COHORT_ASSIGN_OR_RETURN(const json* top_k, OptionalField(body, "top_k", "top_k", Type::number_integer));
  if (top_k != nullptr) {
    if (!top_k->is_number_unsigned() && top_k->get<int64_t>() < 0) return FieldError("top_k", "must be >= 0");
    if (top_k->get<uint64_t>() > (1u << 20)) return FieldError("top_k", "must be at most 1048576");
    out.top_k = static_cast<int32_t>(top_k->get<uint64_t>());
  }
  COHORT_ASSIGN_OR_RETURN(const json* stops, OptionalField(body, "stop_sequences", "stop_sequences", Type::array));
  if (stops != nullptr && !stops->empty()) {
    std::vector<std::string> list;
    for (const json& s : *stops) {
      if (!s.is_string()) return FieldError("stop_sequences", "must be an array of strings");
      list.push_back(s.get<std::string>());
    }
    const Status valid = engine::ValidateStopStrings(list);
    if (!valid.ok()) return FieldError("stop_sequences", valid.message());
    openai["stop"] = *stops;
  }
  return Status::Ok();
}

// Anthropic's error types by HTTP status.
const char* ErrorType(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

json ErrorObject(const ApiError& error) {
  return {{"type", "error"}, {"error", {{"type", ErrorType(error.http_status)}, {"message", error.message}}}};
}

class AnthropicDialect final : public Dialect {
 public:
  std::string ErrorBody(const ApiError& error) const override { return DumpJson(ErrorObject(error)); }
  const char* IdPrefix() const override { return "msg_"; }
  void Prepare(const ApiRequest& request) override { stops_ = request.options.stop; }

  std::string Whole(const ResponseMeta& meta, const engine::RequestOutput& total, const tokenizer::Tokenizer&) override {
    json message = Message(meta, total.prompt_tokens, total.cached_tokens);
    const json blocks = Blocks(meta, total.text);
    for (const json& block : blocks) message["content"].push_back(block);
    SetStop(message, total, HasToolUse(blocks));
    message["usage"]["output_tokens"] = total.completion_tokens;
    return DumpJson(message);
  }

  std::string StreamStart(const ResponseMeta& meta, int32_t prompt_tokens, const tokenizer::Tokenizer&) override {
    std::string events = NamedEvent("message_start", {{"type", "message_start"}, {"message", Message(meta, prompt_tokens, 0)}});
    // With tools the blocks are known only once the text is parsed: they all go out at the end.
    if (meta.parse_tools) return events + NamedEvent("ping", {{"type", "ping"}});
    events += NamedEvent("content_block_start", {{"type", "content_block_start"}, {"index", 0},
                                                 {"content_block", {{"type", "text"}, {"text", ""}}}});
    return events + NamedEvent("ping", {{"type", "ping"}});
  }

  std::string StreamPiece(const ResponseMeta& meta, const engine::RequestOutput& piece, const tokenizer::Tokenizer&) override {
    if (meta.parse_tools) {
      tool_text_ += piece.text;
      return "";
    }
    if (piece.text.empty()) return "";
    return NamedEvent("content_block_delta", {{"type", "content_block_delta"}, {"index", 0},
                                              {"delta", {{"type", "text_delta"}, {"text", piece.text}}}});
  }

  std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last, const tokenizer::Tokenizer&) override {
    std::string events;
    bool tool_use = false;
    if (meta.parse_tools) {
      const json blocks = Blocks(meta, tool_text_);
      tool_use = HasToolUse(blocks);
      for (size_t i = 0; i < blocks.size(); ++i) events += BlockEvents(blocks[i], i);
    } else {
      events = NamedEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}});
    }
    json delta = {{"type", "message_delta"}, {"delta", json::object()},
                  {"usage", {{"output_tokens", last.completion_tokens}}}};
    SetStop(delta["delta"], last, tool_use);
    events += NamedEvent("message_delta", delta);
    return events + NamedEvent("message_stop", {{"type", "message_stop"}});
  }

  std::string StreamError(const ApiError& error) override { return NamedEvent("error", ErrorObject(error)); }

 private:
  // The message object without its content's text; input_tokens counts the prompt tokens
  // not read from the prefix cache, as Anthropic counts cache reads apart.
  static json Message(const ResponseMeta& meta, int32_t prompt_tokens, int32_t cached_tokens) {
    return {{"id", meta.id}, {"type", "message"}, {"role", "assistant"}, {"model", meta.model},
            {"content", json::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
            {"usage", {{"input_tokens", prompt_tokens - cached_tokens}, {"cache_creation_input_tokens", 0},
                       {"cache_read_input_tokens", cached_tokens}, {"output_tokens", 0}}}};
  }

  // The content blocks of a finished text: with tools, its parse (a thinking block, the
  // text, a tool_use block per call, its input an object); without, the text as it is.
  static json Blocks(const ResponseMeta& meta, const std::string& text) {
    json blocks = json::array();
    if (!meta.parse_tools) {
      if (!text.empty()) blocks.push_back({{"type", "text"}, {"text", text}});
      return blocks;
    }
    const AssistantOutput parsed = ParseToolOutput(meta, text);
    if (!parsed.reasoning.empty()) blocks.push_back({{"type", "thinking"}, {"thinking", parsed.reasoning}, {"signature", ""}});
    if (!parsed.content.empty()) blocks.push_back({{"type", "text"}, {"text", parsed.content}});
    for (const ParsedToolCall& call : parsed.tool_calls) {
      json input = json::parse(call.arguments, nullptr, false);  // the parser gives an object's text
      if (!input.is_object()) input = json::object();
      blocks.push_back({{"type", "tool_use"}, {"id", "toolu_" + call.id}, {"name", call.name}, {"input", std::move(input)}});
    }
    return blocks;
  }

  static bool HasToolUse(const json& blocks) {
    return std::any_of(blocks.begin(), blocks.end(), [](const json& b) { return b["type"] == "tool_use"; });
  }

  // One finished block as Anthropic streams it: its start (a tool_use with an empty input),
  // its delta (text_delta, thinking_delta or input_json_delta) and its stop.
  static std::string BlockEvents(const json& block, size_t index) {
    const std::string type = block["type"];
    json start = block;
    json delta;
    if (type == "tool_use") {
      start["input"] = json::object();
      delta = {{"type", "input_json_delta"}, {"partial_json", DumpJson(block["input"])}};
    } else if (type == "thinking") {
      start["thinking"] = "";
      delta = {{"type", "thinking_delta"}, {"thinking", block["thinking"]}};
    } else {
      start["text"] = "";
      delta = {{"type", "text_delta"}, {"text", block["text"]}};
    }
    std::string events = NamedEvent("content_block_start", {{"type", "content_block_start"}, {"index", index}, {"content_block", start}});
    events += NamedEvent("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
    return events + NamedEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }

  void SetStop(json& target, const engine::RequestOutput& out, bool tool_use) const {
    target["stop_sequence"] = nullptr;
    // A call cut off by max_tokens is still max_tokens; a complete one ends the turn.
    if (tool_use && out.finish_reason != engine::FinishReason::kLength) {
      target["stop_reason"] = "tool_use";
      return;
    }
    switch (out.finish_reason) {
      case engine::FinishReason::kLength: target["stop_reason"] = "max_tokens"; break;
      case engine::FinishReason::kStop:
        target["stop_reason"] = "stop_sequence";
        if (out.stop_index >= 0 && out.stop_index < static_cast<int>(stops_.size())) {
          target["stop_sequence"] = stops_[static_cast<size_t>(out.stop_index)];
        }
        break;
      default: target["stop_reason"] = "end_turn"; break;
    }
  }

  std::vector<std::string> stops_;
  std::string tool_text_;  // a stream with tools: the text so far, parsed at the end
};

void HandleMessages(HttpServer& server, const httplib::Request& req, httplib::Response& res, bool count_only) {
  auto dialect = std::make_shared<AnthropicDialect>();
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, *dialect, body.status());
  Result<AnthropicTranslation> translated = TranslateAnthropic(*body, count_only);
  if (!translated.ok()) return SendDialectError(res, *dialect, translated.status());
  DialectCall call;
  call.endpoint = Endpoint::kChat;
  call.openai_body = DumpJson(translated->openai);
  call.model = translated->model;
  if (const int32_t top_k = translated->top_k; top_k >= 0) {
    call.refine = [top_k](ApiRequest& request) {
      request.options.sampling.top_k = top_k;
      return Status::Ok();
    };
  }
  call.dialect = std::move(dialect);
  call.count_only = count_only;
  call.writes_tool_calls = true;  // tool_use blocks; tool_choice any/tool forced by grammar
  server.ServeDialect(req, res, std::move(call));
}

}  // namespace

Result<AnthropicTranslation> TranslateAnthropic(const json& body, bool count_only) {
  AnthropicTranslation out;
  out.openai = json::object();
  COHORT_ASSIGN_OR_RETURN(const json* model, OptionalField(body, "model", "model", Type::string));
  if (model == nullptr) return FieldError("model", "is required");
  out.model = model->get<std::string>();
  out.openai["model"] = out.model;
  COHORT_RETURN_IF_ERROR(TranslateMessages(body, out.openai));
  COHORT_RETURN_IF_ERROR(TranslateSampling(body, count_only, out));
  COHORT_RETURN_IF_ERROR(TranslateTools(body, out.openai));
  return out;
}

void AddAnthropicRoutes(HttpServer& server) {
  HttpServer* s = &server;
  server.routes().Post("/v1/messages", [s](const httplib::Request& req, httplib::Response& res) {
    HandleMessages(*s, req, res, false);
  });
  server.routes().Post("/v1/messages/count_tokens", [s](const httplib::Request& req, httplib::Response& res) {
    HandleMessages(*s, req, res, true);
  });
}

}  // namespace cohort::server
