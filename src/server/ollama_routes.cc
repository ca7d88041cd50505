// Ollama's API: /api/chat and /api/generate translated into OpenAI bodies and answered by
// OllamaDialect (NDJSON lines), and the model listings read from the router. See ollama_routes.h.
#include "server/ollama_routes.h"

#include <httplib.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/dtype.h"
#include "engine/serving.h"
#include "gguf/gguf.h"
#include "server/connection_probe.h"
#include "server/dialect.h"
#include "server/dialect_json.h"
#include "server/embedding_routes.h"
#include "server/http_server.h"

namespace cohort::server {
namespace {

using nlohmann::json;
using Type = json::value_t;
using Clock = std::chrono::steady_clock;
constexpr const char* kJson = "application/json";
constexpr size_t kMaxMessages = 4096;
constexpr size_t kMaxTools = 512;

// RFC 3339 in UTC with nanoseconds, as Ollama writes created_at and modified_at.
std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ns / 1000000000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:09d}Z", buf, ns % 1000000000);
}

// The id of the call a tool message at `index` answers, taken from `unanswered`: the first
// named `tool_name` when given, else the first; one of its own when none is left.
std::string AnswerCall(std::vector<std::pair<std::string, std::string>>& unanswered, const json* tool_name, size_t index) {
  auto it = unanswered.begin();
  if (tool_name != nullptr) {
    it = std::find_if(unanswered.begin(), unanswered.end(), [&](const auto& c) { return c.second == *tool_name; });
    if (it == unanswered.end()) it = unanswered.begin();
  }
  if (it == unanswered.end()) return fmt::format("call_tool_{}", index);
  std::string id = it->first;
  unanswered.erase(it);
  return id;
}

// Ollama's messages (content a string; tool_calls with arguments as an object) as OpenAI's.
Status TranslateMessages(const json& body, json& openai) {
  COHORT_ASSIGN_OR_RETURN(const json* list, OptionalField(body, "messages", "messages", Type::array));
  if (list == nullptr || list->empty()) return FieldError("messages", "is required (a non-empty array)");
  if (list->size() > kMaxMessages) return FieldError("messages", "at most " + std::to_string(kMaxMessages));
  json messages = json::array();
  // Ollama's tool results carry no call id: each answers the next unanswered call of the last
  // assistant turn (the one named tool_name, when given), in order.
  std::vector<std::pair<std::string, std::string>> unanswered;  // call id, name
  for (size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return FieldError(at, "must be an object");
    COHORT_ASSIGN_OR_RETURN(const json* role, OptionalField(m, "role", at + ".role", Type::string));
    if (role == nullptr) return FieldError(at + ".role", "is required");
    if (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool") {
      return FieldError(at + ".role", "must be system, user, assistant or tool");
    }
    COHORT_ASSIGN_OR_RETURN(const json* content, OptionalField(m, "content", at + ".content", Type::string));
    COHORT_ASSIGN_OR_RETURN(const json* images, OptionalField(m, "images", at + ".images", Type::array));
    if (images != nullptr && !images->empty()) return FieldError(at + ".images", "images are not supported");
    json out = {{"role", *role}, {"content", content != nullptr ? *content : json("")}};
    COHORT_ASSIGN_OR_RETURN(const json* calls, OptionalField(m, "tool_calls", at + ".tool_calls", Type::array));
    if (calls != nullptr && !calls->empty()) {
      json tool_calls = json::array();
      for (size_t k = 0; k < calls->size(); ++k) {
        const std::string c_at = at + ".tool_calls[" + std::to_string(k) + "]";
        const json& call = (*calls)[k];
        const json* fn = call.is_object() && call.contains("function") ? &call["function"] : nullptr;
        if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
          return FieldError(c_at + ".function", "must be an object with a string name");
        }
        const json args = fn->value("arguments", json::object());
        if (!args.is_object()) return FieldError(c_at + ".function.arguments", "must be an object");
        tool_calls.push_back({{"id", fmt::format("call_{}_{}", i, k)}, {"type", "function"},
                              {"function", {{"name", (*fn)["name"]}, {"arguments", args.dump()}}}});
      }
      unanswered.clear();
      for (const json& c : tool_calls) unanswered.emplace_back(c["id"], c["function"]["name"]);
      out["tool_calls"] = std::move(tool_calls);
    }
    COHORT_ASSIGN_OR_RETURN(const json* tool_name, OptionalField(m, "tool_name", at + ".tool_name", Type::string));
    if (tool_name != nullptr) out["name"] = *tool_name;
    COHORT_ASSIGN_OR_RETURN(const json* call_id, OptionalField(m, "tool_call_id", at + ".tool_call_id", Type::string));
    if (*role == "tool") out["tool_call_id"] = call_id != nullptr ? call_id->get<std::string>() : AnswerCall(unanswered, tool_name, i);
    messages.push_back(std::move(out));
  }
  openai["messages"] = std::move(messages);
  return Status::Ok();
}

// /api/generate: a user turn (after `system`) through the chat template, or with raw: true
// the prompt as it is, a completion.
Status TranslatePrompt(const json& body, OllamaTranslation& out) {
  COHORT_ASSIGN_OR_RETURN(const json* prompt, OptionalField(body, "prompt", "prompt", Type::string));
  COHORT_ASSIGN_OR_RETURN(const json* system, OptionalField(body, "system", "system", Type::string));
  COHORT_ASSIGN_OR_RETURN(const json* raw, OptionalField(body, "raw", "raw", Type::boolean));
  COHORT_ASSIGN_OR_RETURN(const json* images, OptionalField(body, "images", "images", Type::array));
  COHORT_ASSIGN_OR_RETURN(const json* context, OptionalField(body, "context", "context", Type::array));
  COHORT_ASSIGN_OR_RETURN(const json* suffix, OptionalField(body, "suffix", "suffix", Type::string));
  COHORT_ASSIGN_OR_RETURN(const json* tmpl, OptionalField(body, "template", "template", Type::string));
  if (images != nullptr && !images->empty()) return FieldError("images", "images are not supported");
  if (context != nullptr && !context->empty()) return FieldError("context", "is not supported: send the conversation with /api/chat");
  if (suffix != nullptr && !suffix->get<std::string>().empty()) return FieldError("suffix", "is not supported");
  if (tmpl != nullptr && !tmpl->get<std::string>().empty()) return FieldError("template", "is not supported");
  const std::string text = prompt != nullptr ? prompt->get<std::string>() : "";
  if (raw != nullptr && raw->get<bool>()) {
    out.endpoint = Endpoint::kCompletion;
    out.openai["prompt"] = text;
    return Status::Ok();
  }
  json messages = json::array();
  if (system != nullptr) messages.push_back({{"role", "system"}, {"content", *system}});
  messages.push_back({{"role", "user"}, {"content", text}});
  out.openai["messages"] = std::move(messages);
  return Status::Ok();
}

Status TranslateOptions(const json& body, OllamaTranslation& out) {
  COHORT_ASSIGN_OR_RETURN(const json* options, OptionalField(body, "options", "options", Type::object));
  if (options == nullptr) return Status::Ok();
  const json& o = *options;
  json& openai = out.openai;
  for (const auto& [key, param] : {std::pair{"temperature", "temperature"}, std::pair{"top_p", "top_p"},
                                   std::pair{"presence_penalty", "presence_penalty"},
                                   std::pair{"frequency_penalty", "frequency_penalty"}}) {
    COHORT_ASSIGN_OR_RETURN(const json* v, OptionalField(o, key, std::string("options.") + key, Type::number_float));
    if (v != nullptr) openai[param] = *v;  // ranges checked by the OpenAI parse
  }
  COHORT_ASSIGN_OR_RETURN(const json* seed, OptionalField(o, "seed", "options.seed", Type::number_integer));
  if (seed != nullptr) openai["seed"] = *seed;
  COHORT_ASSIGN_OR_RETURN(const json* n, OptionalField(o, "num_predict", "options.num_predict", Type::number_integer));
  if (n != nullptr) {
    // -1 (no limit) and -2 (fill the context) both leave the server's default.
    if ((n->is_number_unsigned() && n->get<uint64_t>() > 0) || (!n->is_number_unsigned() && n->get<int64_t>() > 0)) {
      openai["max_tokens"] = *n;
    } else if (n->get<int64_t>() != -1 && n->get<int64_t>() != -2) {
      return FieldError("options.num_predict", "must be -1, -2 or >= 1");
    }
  }
  COHORT_ASSIGN_OR_RETURN(const json* stop, OptionalField(o, "stop", "options.stop", Type::array));
  if (stop != nullptr && !stop->empty()) openai["stop"] = *stop;
  auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t& into) -> Status {
    COHORT_ASSIGN_OR_RETURN(const json* v, OptionalField(o, key, std::string("options.") + key, Type::number_integer));
    if (v == nullptr) return Status::Ok();
    if ((v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi)) || v->get<int64_t>() < lo ||
        v->get<int64_t>() > hi) {
      return FieldError(std::string("options.") + key, fmt::format("must be in [{}, {}]", lo, hi));
    }
    into = v->get<int64_t>();
    return Status::Ok();
  };
  auto number = [&](const char* key, double lo, double hi, double& into) -> Status {
    COHORT_ASSIGN_OR_RETURN(const json* v, OptionalField(o, key, std::string("options.") + key, Type::number_float));
    if (v == nullptr) return Status::Ok();
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi)) return FieldError(std::string("options.") + key, fmt::format("must be in [{}, {}]", lo, hi));
    into = x;
    return Status::Ok();
  };
  int64_t top_k = -1, last_n = -2;
  COHORT_RETURN_IF_ERROR(integer("top_k", 0, 1 << 20, top_k));
  COHORT_RETURN_IF_ERROR(integer("repeat_last_n", -1, 1 << 20, last_n));
  COHORT_RETURN_IF_ERROR(integer("num_ctx", 1, 1 << 24, out.num_ctx));
  COHORT_RETURN_IF_ERROR(number("min_p", 0.0, 1.0, out.min_p));
  COHORT_RETURN_IF_ERROR(number("repeat_penalty", 0.0, 10.0, out.repeat_penalty));
  out.top_k = static_cast<int32_t>(top_k);
  out.repeat_last_n = static_cast<int32_t>(last_n);
  return Status::Ok();
}

// Ollama's `format`: "json", or a JSON schema, as OpenAI's response_format.
Status TranslateFormat(const json& body, json& openai) {
  auto it = body.find("format");
  if (it == body.end() || it->is_null() || *it == "") return Status::Ok();
  if (*it == "json") {
    openai["response_format"] = {{"type", "json_object"}};
  } else if (it->is_object()) {
    openai["response_format"] = {{"type", "json_schema"}, {"json_schema", {{"name", "format"}, {"schema", *it}, {"strict", true}}}};
  } else {
    return FieldError("format", "must be \"json\" or a JSON schema object");
  }
  return Status::Ok();
}

class OllamaDialect final : public Dialect {
 public:
  explicit OllamaDialect(bool chat) : chat_(chat), start_(Clock::now()) {}

  std::string ErrorBody(const ApiError& error) const override { return DumpJson({{"error", error.message}}); }
  const char* IdPrefix() const override { return "ollama-"; }
  const char* StreamType() const override { return "application/x-ndjson"; }

  std::string Whole(const ResponseMeta& meta, const engine::RequestOutput& total, const tokenizer::Tokenizer&) override {
    json line = Line(meta, total.text);
    Finish(line, total);
    return DumpJson(line);
  }
  // With tools the text waits and goes out parsed in the last line, since a call is known
  // only whole.

  std::string StreamStart(const ResponseMeta&, int32_t, const tokenizer::Tokenizer&) override { return ""; }
  std::string StreamPiece(const ResponseMeta& meta, const engine::RequestOutput& piece, const tokenizer::Tokenizer&) override {
    if (!piece.tokens.empty() && first_token_ == Clock::time_point{}) first_token_ = Clock::now();
    if (meta.parse_tools) tool_text_ += piece.text;
    if (piece.text.empty() || meta.parse_tools) return "";
    return DumpJson(Line(meta, piece.text)) + "\n";
  }
  std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last, const tokenizer::Tokenizer&) override {
    json line = Line(meta, tool_text_);
    Finish(line, last);
    return DumpJson(line) + "\n";
  }
  std::string StreamError(const ApiError& error) override { return ErrorBody(error) + "\n"; }

 private:
  json Line(const ResponseMeta& meta, const std::string& text) const {
    json line = {{"model", meta.model}, {"created_at", Rfc3339(std::chrono::system_clock::now())}};
    if (chat_ && meta.parse_tools) {
      const AssistantOutput parsed = ParseToolOutput(meta, text);
      line["message"] = {{"role", "assistant"}, {"content", parsed.content}};
      if (!parsed.reasoning.empty()) line["message"]["thinking"] = parsed.reasoning;
      json calls = json::array();
      for (const ParsedToolCall& call : parsed.tool_calls) {
        json args = json::parse(call.arguments, nullptr, false);  // Ollama's arguments are an object
        if (!args.is_object()) args = json::object();
        calls.push_back({{"function", {{"name", call.name}, {"arguments", std::move(args)}}}});
      }
      if (!calls.empty()) line["message"]["tool_calls"] = std::move(calls);
    } else if (chat_) {
      line["message"] = {{"role", "assistant"}, {"content", text}};
    } else {
      line["response"] = text;
    }
    line["done"] = false;
    return line;
  }

  // The last line's counts and durations (nanoseconds), as Ollama reports them.
  void Finish(json& line, const engine::RequestOutput& out) const {
    const auto now = Clock::now();
    const auto first = first_token_ == Clock::time_point{} ? now : first_token_;
    auto ns = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
    line["done"] = true;
    line["done_reason"] = out.finish_reason == engine::FinishReason::kLength ? "length" : "stop";
    line["total_duration"] = ns(now - start_);
    line["load_duration"] = 0;
    line["prompt_eval_count"] = out.prompt_tokens;
    line["prompt_eval_duration"] = ns(first - start_);
    line["eval_count"] = out.completion_tokens;
    line["eval_duration"] = ns(now - first);
  }

  bool chat_;
  std::string tool_text_;  // a stream with tools: the text so far
  Clock::time_point start_;
  Clock::time_point first_token_{};
};

void HandleGenerate(HttpServer& server, const httplib::Request& req, httplib::Response& res, bool chat) {
  auto dialect = std::make_shared<OllamaDialect>(chat);
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, *dialect, body.status());
  Result<OllamaTranslation> t = TranslateOllama(*body, chat);
  if (!t.ok()) return SendDialectError(res, *dialect, t.status());
  if (!chat && t->endpoint == Endpoint::kChat && t->openai["messages"].back()["content"] == "" &&
      t->openai["messages"].size() == 1) {
    // An empty prompt asks Ollama to load the model: it answers at once.
    if (server.LocalOrRelay(t->model, req, res, *dialect) == nullptr) return;
    return res.set_content(DumpJson({{"model", t->model}, {"created_at", Rfc3339(std::chrono::system_clock::now())},
                                     {"response", ""}, {"done", true}, {"done_reason", "load"}}),
                           kJson);
  }
  DialectCall call;
  call.endpoint = t->endpoint;
  call.openai_body = DumpJson(t->openai);
  call.model = t->model;
  const OllamaTranslation options = *t;
  call.refine = [options](ApiRequest& request) {
    engine::SamplingParams& s = request.options.sampling;
    if (options.top_k >= 0) s.top_k = options.top_k;
    if (options.min_p >= 0.0) s.min_p = static_cast<float>(options.min_p);
    if (options.repeat_penalty >= 0.0) s.repeat_penalty = static_cast<float>(options.repeat_penalty);
    if (options.repeat_last_n >= -1) s.repeat_last_n = options.repeat_last_n;
    if (s.repeat_penalty != 1.0f && s.repeat_last_n == 0) s.repeat_last_n = 64;  // Ollama's window
    if (options.num_ctx > 0 && request.options.max_tokens > options.num_ctx) {
      request.options.max_tokens = static_cast<int32_t>(options.num_ctx);
    }
    return Status::Ok();
  };
  call.field_names = {{"max_tokens", "options.num_predict"}, {"temperature", "options.temperature"},
                      {"top_p", "options.top_p"}, {"seed", "options.seed"}, {"stop", "options.stop"},
                      {"presence_penalty", "options.presence_penalty"},
                      {"frequency_penalty", "options.frequency_penalty"}, {"response_format", "format"}};
  call.dialect = std::move(dialect);
  call.writes_tool_calls = true;  // message.tool_calls
  server.ServeDialect(req, res, std::move(call));
}

// details and model_info of a model served here, from its GGUF.
json Details(engine::ServingInstance* instance) {
  json details = {{"parent_model", ""}, {"format", "gguf"}, {"family", ""}, {"families", json::array()},
                  {"parameter_size", ""}, {"quantization_level", ""}};
  if (instance == nullptr || instance->model().file() == nullptr) return details;
  const gguf::File& file = *instance->model().file();
  const auto arch_or = file.GetString("general.architecture", "");
  const std::string arch = arch_or.ok() ? *arch_or : "";
  details["family"] = arch;
  details["families"] = json::array({arch});
  int64_t params = 0;
  // The quantization Ollama names is the file's; here: the type holding the most weights.
  std::map<DType, int64_t> by_type;
  for (const auto& t : file.tensors()) {
    params += t.n_elements();
    by_type[t.type] += t.n_elements();
  }
  details["parameter_size"] = params >= 1000000000 ? fmt::format("{:.1f}B", params / 1e9) : fmt::format("{:.1f}M", params / 1e6);
  auto most = std::max_element(by_type.begin(), by_type.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != by_type.end()) details["quantization_level"] = std::string(DTypeName(most->first));
  return details;
}

json ModelJson(const ModelEntry& entry) {
  engine::ServingInstance* local = entry.local.get();
  const gguf::File* file = local != nullptr ? local->model().file() : nullptr;
  // The file's modification time; now for an instance whose file this node does not hold.
  auto modified = std::chrono::system_clock::now();
  std::error_code ec;
  if (file != nullptr) {
    const auto t = std::filesystem::last_write_time(file->path(), ec);
    if (!ec) modified = std::chrono::file_clock::to_sys(t);
  }
  return {{"name", entry.id}, {"model", entry.id}, {"modified_at", Rfc3339(modified)},
          {"size", file != nullptr ? file->file_size() : 0}, {"digest", ""}, {"details", Details(local)}};
}

void Show(HttpServer& server, const httplib::Request& req, httplib::Response& res) {
  OllamaDialect dialect(true);
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, dialect, body.status());
  std::string model = body->value("model", json("")).is_string() ? body->value("model", "") : "";
  if (model.empty() && body->value("name", json("")).is_string()) model = body->value("name", "");  // older clients
  auto instance = server.LocalOrRelay(model, req, res, dialect);
  if (instance == nullptr) return;
  json info = json::object();
  if (const gguf::File* file = instance->model().file(); file != nullptr) {
    for (const auto& kv : file->metadata()) {
      if (kv.key.rfind("tokenizer.", 0) == 0) continue;  // vocabularies are large
      if (auto v = file->GetString(kv.key); v.ok()) info[kv.key] = *v;
      else if (auto i = file->GetInt(kv.key); i.ok()) info[kv.key] = *i;
      else if (auto f = file->GetFloat(kv.key); f.ok()) info[kv.key] = *f;
    }
  }
  // The GGUF's own template (Jinja, where Ollama's are Go templates); a --chat-template
  // override is not shown.
  std::string tmpl;
  if (const gguf::File* file = instance->model().file(); file != nullptr) {
    if (auto t = file->GetString("tokenizer.chat_template", ""); t.ok()) tmpl = *t;
  }
  json capabilities = json::array({"completion"});
  res.set_content(DumpJson({{"modelfile", ""}, {"parameters", ""}, {"template", tmpl},
                            {"details", Details(instance.get())}, {"model_info", std::move(info)},
                            {"capabilities", std::move(capabilities)}}),
                  kJson);
}

// /api/embed (`legacy` false: input a string or strings, normalized, truncated to the context
// unless truncate is false) and the older /api/embeddings (prompt, one vector as it comes).
void HandleEmbed(HttpServer& server, const httplib::Request& req, httplib::Response& res, bool legacy) {
  OllamaDialect dialect(true);
  const auto start = Clock::now();
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, dialect, body.status());
  auto fail = [&](const Status& status) { SendDialectError(res, dialect, status); };
  auto model = OptionalField(*body, "model", "model", Type::string);
  if (!model.ok()) return fail(model.status());
  if (*model == nullptr) return fail(FieldError("model", "is required"));
  const std::string name = (*model)->get<std::string>();
  auto instance = server.LocalOrRelay(name, req, res, dialect);
  if (instance == nullptr) return;
  std::vector<EmbeddingInput> inputs;
  EmbeddingOptions options;
  const ConnectionProbe probe = ConnectionProbe::Find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  options.client_gone = [&probe] { return probe.ClientGone(); };
  if (legacy) {
    auto prompt = OptionalField(*body, "prompt", "prompt", Type::string);
    if (!prompt.ok()) return fail(prompt.status());
    if (*prompt == nullptr) return fail(FieldError("prompt", "is required"));
    inputs.push_back({(*prompt)->get<std::string>(), {}, false});
    options.normalize = false;
  } else {
    const auto input = body->find("input");
    if (input == body->end() || input->is_null()) return fail(FieldError("input", "is required"));
    if (input->is_string()) {
      inputs.push_back({input->get<std::string>(), {}, false});
    } else if (input->is_array() && !input->empty() && input->size() <= 2048) {
      for (size_t i = 0; i < input->size(); ++i) {
        if (!(*input)[i].is_string()) return fail(FieldError(fmt::format("input[{}]", i), "must be a string"));
        inputs.push_back({(*input)[i].get<std::string>(), {}, false});
      }
    } else {
      return fail(FieldError("input", "must be a string or an array of 1 to 2048 strings"));
    }
    auto truncate = OptionalField(*body, "truncate", "truncate", Type::boolean);
    if (!truncate.ok()) return fail(truncate.status());
    options.truncate = *truncate == nullptr || (*truncate)->get<bool>();  // Ollama truncates unless told not to
    auto dims = OptionalField(*body, "dimensions", "dimensions", Type::number_integer);
    if (!dims.ok()) return fail(dims.status());
    if (*dims != nullptr) {
      options.dimensions = (*dims)->get<int64_t>();
      if (options.dimensions < 1) return fail(FieldError("dimensions", "must be at least 1"));
    }
  }
  Result<Embeddings> embedded = Embed(*instance, inputs, options);
  if (!embedded.ok()) return fail(embedded.status());
  if (legacy) return res.set_content(DumpJson({{"embedding", embedded->vectors.front()}}), kJson);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  res.set_content(DumpJson({{"model", name},
                            {"embeddings", embedded->vectors},
                            {"total_duration", ns},
                            {"load_duration", 0},
                            {"prompt_eval_count", embedded->prompt_tokens}}),
                  kJson);
}

}  // namespace

Result<OllamaTranslation> TranslateOllama(const json& body, bool chat) {
  OllamaTranslation out;
  out.openai = json::object();
  COHORT_ASSIGN_OR_RETURN(const json* model, OptionalField(body, "model", "model", Type::string));
  if (model == nullptr) return FieldError("model", "is required");
  out.model = model->get<std::string>();
  out.openai["model"] = out.model;
  if (chat) {
    COHORT_RETURN_IF_ERROR(TranslateMessages(body, out.openai));
  } else {
    COHORT_RETURN_IF_ERROR(TranslatePrompt(body, out));
  }
  COHORT_ASSIGN_OR_RETURN(const json* stream, OptionalField(body, "stream", "stream", Type::boolean));
  out.openai["stream"] = stream == nullptr || stream->get<bool>();  // Ollama streams unless told not to
  COHORT_RETURN_IF_ERROR(TranslateOptions(body, out));
  COHORT_RETURN_IF_ERROR(TranslateFormat(body, out.openai));
  COHORT_ASSIGN_OR_RETURN(const json* tools, OptionalField(body, "tools", "tools", Type::array));
  if (tools != nullptr && !tools->empty()) {
    if (tools->size() > kMaxTools) return FieldError("tools", "at most " + std::to_string(kMaxTools) + " tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      if (!(*tools)[i].is_object()) return FieldError("tools[" + std::to_string(i) + "]", "must be an object");
    }
    out.openai["tools"] = *tools;  // Ollama's are OpenAI-shaped: the chat parse reads them
    // Not Ollama's: cohort's extension, OpenAI's tool_choice (checked by the chat parse), so
    // a script can force a call as it can on the other APIs.
    if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null()) out.openai["tool_choice"] = *c;
  }
  return out;
}

void AddOllamaRoutes(HttpServer& server) {
  HttpServer* s = &server;
  httplib::Server& http = server.routes();
  http.Post("/api/chat", [s](const httplib::Request& req, httplib::Response& res) { HandleGenerate(*s, req, res, true); });
  http.Post("/api/generate", [s](const httplib::Request& req, httplib::Response& res) { HandleGenerate(*s, req, res, false); });
  http.Post("/api/embed", [s](const httplib::Request& req, httplib::Response& res) { HandleEmbed(*s, req, res, false); });
  http.Post("/api/embeddings", [s](const httplib::Request& req, httplib::Response& res) { HandleEmbed(*s, req, res, true); });
  http.Post("/api/show", [s](const httplib::Request& req, httplib::Response& res) { Show(*s, req, res); });
  http.Get("/api/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"version":"0.0.0-cohort"})", kJson);  // cohort has no release number yet
  });
  auto list = [s](bool running) {
    return [s, running](const httplib::Request&, httplib::Response& res) {
      json models = json::array();
      for (const ModelEntry& entry : s->router().Models()) {
        if (running && !entry.ready) continue;
        json m = ModelJson(entry);
        if (running) {
          m["expires_at"] = "2999-01-01T00:00:00Z";  // served until the server stops
          m["size_vram"] = 0;
        }
        models.push_back(std::move(m));
      }
      res.set_content(DumpJson({{"models", std::move(models)}}), kJson);
    };
  };
  http.Get("/api/tags", list(false));
  http.Get("/api/ps", list(true));
}

}  // namespace cohort::server
