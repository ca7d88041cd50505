// The Responses API: its request translated into an OpenAI chat body, its answer and event
// stream written by ResponsesDialect. See responses_routes.h.
#include "server/responses_routes.h"

#include <httplib.h>

#include <memory>
#include <string>

#include "server/dialect.h"
#include "server/dialect_json.h"
#include "server/http_server.h"

namespace cohort::server {
namespace {

using nlohmann::json;
using Type = json::value_t;

constexpr size_t kMaxItems = 4096;
constexpr size_t kMaxTools = 512;

// A message item's content: a string, or input_text / output_text parts.
Result<std::string> ContentText(const json& content, const std::string& param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return FieldError(param, "must be a string or an array of content parts");
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = param + "[" + std::to_string(i) + "]";
    if (!part.is_object()) return FieldError(at, "must be an object");
    const std::string type = part.value("type", json("")).is_string() ? part.value("type", "") : "";
    if (type != "input_text" && type != "output_text" && type != "text") {
      return FieldError(at + ".type", "'" + type + "' is not supported (input_text, output_text)");
    }
    COHORT_ASSIGN_OR_RETURN(const json* t, OptionalField(part, "text", at + ".text", Type::string));
    if (t == nullptr) return FieldError(at + ".text", "is required");
    text += t->get<std::string>();
  }
  return text;
}

Status TranslateItem(const json& item, const std::string& at, json& messages) {
  if (!item.is_object()) return FieldError(at, "must be an object");
  COHORT_ASSIGN_OR_RETURN(const json* type_field, OptionalField(item, "type", at + ".type", Type::string));
  const std::string type = type_field != nullptr ? type_field->get<std::string>() : "message";
  if (type == "message") {
    COHORT_ASSIGN_OR_RETURN(const json* role, OptionalField(item, "role", at + ".role", Type::string));
    if (role == nullptr) return FieldError(at + ".role", "is required");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant") return FieldError(at + ".role", "must be user, assistant, system or developer");
    auto content = item.find("content");
    if (content == item.end() || content->is_null()) return FieldError(at + ".content", "is required");
    COHORT_ASSIGN_OR_RETURN(std::string text, ContentText(*content, at + ".content"));
    messages.push_back({{"role", r}, {"content", text}});
  } else if (type == "function_call") {
    COHORT_ASSIGN_OR_RETURN(const json* id, OptionalField(item, "call_id", at + ".call_id", Type::string));
    COHORT_ASSIGN_OR_RETURN(const json* name, OptionalField(item, "name", at + ".name", Type::string));
    COHORT_ASSIGN_OR_RETURN(const json* args, OptionalField(item, "arguments", at + ".arguments", Type::string));
    if (id == nullptr || name == nullptr) return FieldError(at, "a function_call needs call_id and name");
    json call = {{"id", *id}, {"type", "function"}, {"function", {{"name", *name}, {"arguments", args ? *args : json("{}")}}}};
    // Consecutive calls are one assistant turn's parallel calls.
    if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls")) {
      messages.back()["tool_calls"].push_back(std::move(call));
    } else {
      messages.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({std::move(call)})}});
    }
  } else if (type == "function_call_output") {
    COHORT_ASSIGN_OR_RETURN(const json* id, OptionalField(item, "call_id", at + ".call_id", Type::string));
    if (id == nullptr) return FieldError(at + ".call_id", "is required");
    auto output = item.find("output");
    if (output == item.end() || output->is_null()) return FieldError(at + ".output", "is required");
    COHORT_ASSIGN_OR_RETURN(std::string text, ContentText(*output, at + ".output"));
    messages.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", text}});
  } else if (type == "reasoning") {
    // Earlier reasoning is not shown to the model again.
  } else if (type == "item_reference") {
    return FieldError(at, "item references need stored responses; this server is stateless");
  } else {
    return FieldError(at + ".type", "'" + type + "' is not supported (message, function_call, function_call_output)");
  }
  return Status::Ok();
}

Status TranslateInput(const json& body, json& openai) {
  json messages = json::array();
  COHORT_ASSIGN_OR_RETURN(const json* instructions, OptionalField(body, "instructions", "instructions", Type::string));
  if (instructions != nullptr) messages.push_back({{"role", "system"}, {"content", *instructions}});
  auto input = body.find("input");
  if (input == body.end() || input->is_null()) return FieldError("input", "is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) return FieldError("input", "must not be empty");
    if (input->size() > kMaxItems) return FieldError("input", "at most " + std::to_string(kMaxItems) + " items");
    for (size_t i = 0; i < input->size(); ++i) {
      COHORT_RETURN_IF_ERROR(TranslateItem((*input)[i], "input[" + std::to_string(i) + "]", messages));
    }
  } else {
    return FieldError("input", "must be a string or an array of items");
  }
  openai["messages"] = std::move(messages);
  return Status::Ok();
}

// Responses' flat function tools {type, name, description, parameters} as chat's nested ones.
Status TranslateTools(const json& body, json& openai) {
  COHORT_ASSIGN_OR_RETURN(const json* tools, OptionalField(body, "tools", "tools", Type::array));
  if (tools != nullptr && !tools->empty()) {
    if (tools->size() > kMaxTools) return FieldError("tools", "at most " + std::to_string(kMaxTools) + " tools");
    json out = json::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return FieldError(at, "must be an object");
      if (t.value("type", json()) != "function") return FieldError(at + ".type", "only function tools are supported");
      COHORT_ASSIGN_OR_RETURN(const json* name, OptionalField(t, "name", at + ".name", Type::string));
      if (name == nullptr) return FieldError(at + ".name", "is required");
      json function = {{"name", *name}};
      for (const char* key : {"description", "parameters", "strict"}) {
        if (auto it = t.find(key); it != t.end() && !it->is_null()) function[key] = *it;
      }
      out.push_back({{"type", "function"}, {"function", std::move(function)}});
    }
    openai["tools"] = std::move(out);
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      openai["tool_choice"] = *choice;  // auto, none, required: checked by the chat parse
    } else if (choice->is_object() && choice->value("type", json()) == "function" && choice->contains("name")) {
      openai["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    } else {
      return FieldError("tool_choice", "must be auto, none, required or {\"type\": \"function\", \"name\": ...}");
    }
  }
  if (auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) openai["parallel_tool_calls"] = *p;
  return Status::Ok();
}

Status TranslateFormat(const json& body, json& openai) {
  COHORT_ASSIGN_OR_RETURN(const json* text, OptionalField(body, "text", "text", Type::object));
  if (text == nullptr) return Status::Ok();
  COHORT_ASSIGN_OR_RETURN(const json* format, OptionalField(*text, "format", "text.format", Type::object));
  if (format == nullptr) return Status::Ok();
  const json type = format->value("type", json());
  if (type == "text") return Status::Ok();
  if (type == "json_object") {
    openai["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    json schema = *format;
    schema.erase("type");
    openai["response_format"] = {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
  } else {
    return FieldError("text.format.type", "must be text, json_object or json_schema");
  }
  return Status::Ok();
}

class ResponsesDialect final : public Dialect {
 public:
  std::string ErrorBody(const ApiError& error) const override { return ErrorJson(error); }
  const char* IdPrefix() const override { return "resp_"; }
  void Prepare(const ApiRequest& request) override {
    temperature_ = request.options.sampling.temperature;
    top_p_ = request.options.sampling.top_p;
    max_output_tokens_ = request.options.max_tokens;
  }

  std::string Whole(const ResponseMeta& meta, const engine::RequestOutput& total, const tokenizer::Tokenizer&) override {
    return DumpJson(Response(meta, &total, total.text));
  }

  std::string StreamStart(const ResponseMeta& meta, int32_t, const tokenizer::Tokenizer&) override {
    const json response = Response(meta, nullptr, "");
    std::string events = Event("response.created", {{"response", response}});
    events += Event("response.in_progress", {{"response", response}});
    // With tools the items are known only once the text is parsed: they all go out at the end.
    if (meta.parse_tools) return events;
    events += Event("response.output_item.added", {{"output_index", 0}, {"item", Item(meta, "", false)}});
    return events + Event("response.content_part.added", {{"item_id", ItemId(meta)}, {"output_index", 0},
                                                          {"content_index", 0}, {"part", Part("")}});
  }

  std::string StreamPiece(const ResponseMeta& meta, const engine::RequestOutput& piece, const tokenizer::Tokenizer&) override {
    text_ += piece.text;
    if (piece.text.empty() || meta.parse_tools) return "";
    return Event("response.output_text.delta", {{"item_id", ItemId(meta)}, {"output_index", 0}, {"content_index", 0},
                                                {"delta", piece.text}, {"logprobs", json::array()}});
  }

  std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last, const tokenizer::Tokenizer&) override {
    if (meta.parse_tools) return ItemEvents(meta, last);
    const json where = {{"item_id", ItemId(meta)}, {"output_index", 0}, {"content_index", 0}};
    json done = where;
    done["text"] = text_;
    done["logprobs"] = json::array();
    std::string events = Event("response.output_text.done", done);
    json part = where;
    part["part"] = Part(text_);
    events += Event("response.content_part.done", part);
    events += Event("response.output_item.done", {{"output_index", 0}, {"item", Item(meta, text_, true)}});
    const json response = Response(meta, &last, text_);
    const bool complete = response["status"] == "completed";
    return events + Event(complete ? "response.completed" : "response.incomplete", {{"response", response}});
  }

  // The end of a stream with tools: each output item of the parse with its events (a
  // message's part and text, a function_call's arguments), then the response.
  std::string ItemEvents(const ResponseMeta& meta, const engine::RequestOutput& last) {
    const json response = Response(meta, &last, text_);
    std::string events;
    const json& items = response["output"];
    for (size_t i = 0; i < items.size(); ++i) {
      json item = items[i];
      const json done_item = item;
      item["status"] = "in_progress";
      if (item["type"] == "function_call") {
        item["arguments"] = "";
        events += Event("response.output_item.added", {{"output_index", i}, {"item", item}});
        const json where = {{"item_id", item["id"]}, {"output_index", i}};
        json delta = where;
        delta["delta"] = done_item["arguments"];
        events += Event("response.function_call_arguments.delta", delta);
        json done = where;
        done["arguments"] = done_item["arguments"];
        events += Event("response.function_call_arguments.done", done);
      } else {
        const std::string text = done_item["content"][0]["text"];
        item["content"] = json::array();
        events += Event("response.output_item.added", {{"output_index", i}, {"item", item}});
        const json where = {{"item_id", item["id"]}, {"output_index", i}, {"content_index", 0}};
        json part = where;
        part["part"] = Part("");
        events += Event("response.content_part.added", part);
        json delta = where;
        delta["delta"] = text;
        delta["logprobs"] = json::array();
        events += Event("response.output_text.delta", delta);
        json done = where;
        done["text"] = text;
        done["logprobs"] = json::array();
        events += Event("response.output_text.done", done);
        part["part"] = Part(text);
        events += Event("response.content_part.done", part);
      }
      events += Event("response.output_item.done", {{"output_index", i}, {"item", done_item}});
    }
    const bool complete = response["status"] == "completed";
    return events + Event(complete ? "response.completed" : "response.incomplete", {{"response", response}});
  }

  std::string StreamError(const ApiError& error) override {
    return Event("error", {{"code", error.code.empty() ? json(nullptr) : json(error.code)}, {"message", error.message},
                           {"param", error.param.empty() ? json(nullptr) : json(error.param)}});
  }

 private:
  std::string Event(const char* name, json data) {
    data["type"] = name;
    data["sequence_number"] = sequence_++;
    return NamedEvent(name, data);
  }

  static std::string ItemId(const ResponseMeta& meta) { return "msg_" + meta.id.substr(5); }
  static json Part(const std::string& text) {
    return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
  }
  static json Item(const ResponseMeta& meta, const std::string& text, bool done) {
    return {{"type", "message"}, {"id", ItemId(meta)}, {"status", done ? "completed" : "in_progress"},
            {"role", "assistant"}, {"content", done ? json::array({Part(text)}) : json::array()}};
  }

  // The output items of a finished text: with tools, a message for the parsed text (when
  // there is some) and a function_call item per call; without, the one message.
  static json Output(const ResponseMeta& meta, const std::string& text) {
    if (!meta.parse_tools) return json::array({Item(meta, text, true)});
    const AssistantOutput parsed = ParseToolOutput(meta, text);
    json output = json::array();
    if (!parsed.content.empty() || parsed.tool_calls.empty()) output.push_back(Item(meta, parsed.content, true));
    for (const ParsedToolCall& call : parsed.tool_calls) {
      output.push_back({{"type", "function_call"}, {"id", "fc_" + call.id}, {"call_id", call.id}, {"name", call.name},
                        {"arguments", call.arguments}, {"status", "completed"}});
    }
    return output;
  }

  // The response object; `out` null while it is in progress.
  json Response(const ResponseMeta& meta, const engine::RequestOutput* out, const std::string& text) const {
    json r = {{"id", meta.id}, {"object", "response"}, {"created_at", meta.created}, {"model", meta.model},
              {"status", "in_progress"}, {"error", nullptr}, {"incomplete_details", nullptr},
              {"instructions", nullptr}, {"max_output_tokens", max_output_tokens_}, {"output", json::array()},
              {"parallel_tool_calls", true}, {"temperature", temperature_}, {"top_p", top_p_},
              {"tool_choice", "auto"}, {"tools", json::array()}, {"store", false}, {"metadata", json::object()},
              {"text", {{"format", {{"type", "text"}}}}}, {"usage", nullptr}};
    if (out == nullptr) return r;
    const bool cut = out->finish_reason == engine::FinishReason::kLength;
    r["status"] = cut ? "incomplete" : "completed";
    if (cut) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    r["output"] = Output(meta, text);
    r["usage"] = {{"input_tokens", out->prompt_tokens},
                  {"input_tokens_details", {{"cached_tokens", out->cached_tokens}}},
                  {"output_tokens", out->completion_tokens},
                  {"output_tokens_details", {{"reasoning_tokens", 0}}},
                  {"total_tokens", out->prompt_tokens + out->completion_tokens}};
    return r;
  }

  std::string text_;
  int64_t sequence_ = 0;
  double temperature_ = 1.0;
  double top_p_ = 1.0;
  int32_t max_output_tokens_ = 0;
};

void HandleResponses(HttpServer& server, const httplib::Request& req, httplib::Response& res) {
  auto dialect = std::make_shared<ResponsesDialect>();
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, *dialect, body.status());
  Result<ResponsesTranslation> t = TranslateResponses(*body);
  if (!t.ok()) return SendDialectError(res, *dialect, t.status());
  DialectCall call;
  call.endpoint = Endpoint::kChat;
  call.openai_body = DumpJson(t->openai);
  call.model = t->model;
  call.field_names = {{"max_tokens", "max_output_tokens"}};
  call.dialect = std::move(dialect);
  call.writes_tool_calls = true;  // function_call items; tool_choice required/named forced by grammar
  server.ServeDialect(req, res, std::move(call));
}

}  // namespace

Result<ResponsesTranslation> TranslateResponses(const json& body) {
  ResponsesTranslation out;
  out.openai = json::object();
  COHORT_ASSIGN_OR_RETURN(const json* model, OptionalField(body, "model", "model", Type::string));
  if (model != nullptr) {
    out.model = model->get<std::string>();
    out.openai["model"] = out.model;
  }
  if (auto p = body.find("previous_response_id"); p != body.end() && !p->is_null()) {
    return FieldError("previous_response_id", "is not supported: this server stores no responses (send the whole input)");
  }
  COHORT_RETURN_IF_ERROR(TranslateInput(body, out.openai));
  COHORT_ASSIGN_OR_RETURN(const json* max, OptionalField(body, "max_output_tokens", "max_output_tokens", Type::number_integer));
  if (max != nullptr) out.openai["max_tokens"] = *max;
  for (const char* key : {"temperature", "top_p", "stream"}) {
    if (auto it = body.find(key); it != body.end()) out.openai[key] = *it;  // checked by the chat parse
  }
  COHORT_RETURN_IF_ERROR(TranslateTools(body, out.openai));
  COHORT_RETURN_IF_ERROR(TranslateFormat(body, out.openai));
  return out;
}

void AddResponsesRoutes(HttpServer& server) {
  HttpServer* s = &server;
  server.routes().Post("/v1/responses", [s](const httplib::Request& req, httplib::Response& res) {
    HandleResponses(*s, req, res);
  });
}

}  // namespace cohort::server
