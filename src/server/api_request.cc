// Field-by-field checks of OpenAI request bodies, with OpenAI's ranges and defaults
// (temperature and top_p 1, no top-k or min-p, completions' max_tokens 16).
#include "server/api_request.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/json_schema_grammar.h"
#include "engine/stop.h"

namespace cohort::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxMessages = 4096;
// OpenAI allows 4; autocomplete clients send more, and the engine takes 16.
constexpr size_t kMaxOpenAiStops = engine::kMaxStopStrings;
constexpr size_t kMaxLogitBias = 1024;
constexpr size_t kMaxTools = 128;
constexpr size_t kMaxToolCalls = 64;

Status Bad(const std::string& param, const std::string& why) { return InvalidArgument(param + ": " + why); }

// A number field in [lo, hi], or `fallback` when absent or null.
Result<double> Number(const json& body, const char* key, double lo, double hi, double fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number()) return Bad(key, "must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi) {
    return Bad(key, "must be in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  }
  return v;
}

// An integer field in [lo, hi]; `present` says whether it was given.
Result<int64_t> Integer(const json& body, const char* key, int64_t lo, int64_t hi, int64_t fallback,
                        bool* present = nullptr) {
  if (present != nullptr) *present = false;
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return Bad(key, "must be an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) {
    return Bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  if (present != nullptr) *present = true;
  return v;
}

Result<bool> Bool(const json& body, const char* key, bool fallback) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return Bad(key, "must be a boolean");
  return it->get<bool>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts.
Result<std::string> Content(const json& message, size_t index) {
  const std::string param = "messages[" + std::to_string(index) + "].content";
  auto it = message.find("content");
  if (it == message.end() || it->is_null()) {
    const std::string role = message.value("role", "");
    if (role == "assistant") return std::string();  // e.g. a tool-call turn
    return Bad(param, "is required");
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) return Bad(param, "must be a string or an array of text parts");
  std::string text;
  for (const json& part : *it) {
    const bool is_text = part.is_object() && part.contains("type") && part["type"] == "text" &&
                         part.contains("text") && part["text"].is_string();
    if (!is_text) {
      return Bad(param, "only text parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    text += part["text"].get<std::string>();
  }
  return text;
}

Result<std::string> OptionalString(const json& m, const char* key, const std::string& param) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(param + "." + key, "must be a string");
  return it->get<std::string>();
}

// An assistant's tool_calls, a tool result's tool_call_id and name, earlier reasoning.
Status ParseToolFields(const json& m, const std::string& param, tokenizer::ChatMessage& message) {
  COHORT_ASSIGN_OR_RETURN(message.tool_call_id, OptionalString(m, "tool_call_id", param));
  COHORT_ASSIGN_OR_RETURN(message.name, OptionalString(m, "name", param));
  COHORT_ASSIGN_OR_RETURN(message.reasoning_content, OptionalString(m, "reasoning_content", param));
  if (message.role == "tool" && message.tool_call_id.empty()) return Bad(param + ".tool_call_id", "is required for a tool message");
  auto calls = m.find("tool_calls");
  if (calls == m.end() || calls->is_null()) return Status::Ok();
  if (message.role != "assistant") return Bad(param + ".tool_calls", "only assistant messages carry tool_calls");
  if (!calls->is_array()) return Bad(param + ".tool_calls", "must be an array");
  if (calls->size() > kMaxToolCalls) return Bad(param + ".tool_calls", "at most 64 calls");
  for (size_t k = 0; k < calls->size(); ++k) {
    const json& call = (*calls)[k];
    const std::string where = param + ".tool_calls[" + std::to_string(k) + "]";
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
      return Bad(where + ".function", "is required (an object)");
    }
    const json& fn = call["function"];
    if (!fn.contains("name") || !fn["name"].is_string()) return Bad(where + ".function.name", "is required (a string)");
    tokenizer::ChatToolCall parsed;
    parsed.name = fn["name"].get<std::string>();
    COHORT_ASSIGN_OR_RETURN(parsed.id, OptionalString(call, "id", where));
    auto args = fn.find("arguments");
    if (args == fn.end() || args->is_null()) {
      parsed.arguments = "{}";
    } else if (args->is_string()) {
      parsed.arguments = args->get<std::string>();
    } else if (args->is_object()) {
      parsed.arguments = args->dump();
    } else {
      return Bad(where + ".function.arguments", "must be a JSON string");
    }
    message.tool_calls.push_back(std::move(parsed));
  }
  return Status::Ok();
}

Status ParseMessages(const json& body, ApiRequest& out) {
  auto it = body.find("messages");
  if (it == body.end()) return Bad("messages", "is required");
  if (!it->is_array()) return Bad("messages", "must be an array");
  if (it->empty()) return Bad("messages", "must not be empty");
  if (it->size() > kMaxMessages) return Bad("messages", "at most " + std::to_string(kMaxMessages));
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Bad(param, "must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return Bad(param + ".role", "is required (a string)");
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return Bad(param + ".role", "unknown role '" + role->get<std::string>() +
                                       "' (system, developer, user, assistant, tool)");
    }
    COHORT_ASSIGN_OR_RETURN(std::string content, Content(m, i));
    tokenizer::ChatMessage message{r, std::move(content)};
    COHORT_RETURN_IF_ERROR(ParseToolFields(m, param, message));
    out.messages.push_back(std::move(message));
  }
  return Status::Ok();
}

Status ParsePrompt(const json& body, int32_t n_vocab, ApiRequest& out) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) return Bad("prompt", "is required");
  if (it->is_string()) {
    out.prompt = it->get<std::string>();
    return Status::Ok();
  }
  if (!it->is_array() || it->empty()) return Bad("prompt", "must be a string, or an array of strings or token ids");
  if (it->size() == 1 && (*it)[0].is_string()) {
    out.prompt = (*it)[0].get<std::string>();
    return Status::Ok();
  }
  for (const json& t : *it) {
    if (t.is_string()) return Bad("prompt", "only one prompt per request is supported");
    if (!t.is_number_integer()) return Bad("prompt", "token ids must be integers");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= n_vocab || (t.is_number_unsigned() && t.get<uint64_t>() >= static_cast<uint64_t>(n_vocab))) {
      return Bad("prompt", "token id " + t.dump() + " is outside the vocabulary");
    }
    out.prompt_tokens.push_back(static_cast<int32_t>(id));
  }
  return Status::Ok();
}

Status ParseStop(const json& body, ApiRequest& out) {
  auto it = body.find("stop");
  if (it == body.end() || it->is_null()) return Status::Ok();
  std::vector<std::string> stops;
  if (it->is_string()) {
    stops.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    if (it->size() > kMaxOpenAiStops) return Bad("stop", "at most " + std::to_string(kMaxOpenAiStops) + " stop sequences");
    for (const json& s : *it) {
      if (!s.is_string()) return Bad("stop", "must be a string or an array of strings");
      stops.push_back(s.get<std::string>());
    }
  } else {
    return Bad("stop", "must be a string or an array of strings");
  }
  Status valid = engine::ValidateStopStrings(stops);
  if (!valid.ok()) return Bad("stop", valid.message());
  out.options.stop = std::move(stops);
  return Status::Ok();
}

Status ParseLogitBias(const json& body, int32_t n_vocab, engine::SamplingParams& sampling) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Bad("logit_bias", "must be an object of token id -> bias");
  if (it->size() > kMaxLogitBias) return Bad("logit_bias", "at most 1024 entries");
  for (auto& [key, value] : it->items()) {
    char* end = nullptr;
    const long id = std::strtol(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab) {
      return Bad("logit_bias", "key '" + key + "' is not a token id in the vocabulary");
    }
    if (!value.is_number() || !std::isfinite(value.get<double>()) || std::fabs(value.get<double>()) > 100.0) {
      return Bad("logit_bias", "values must be numbers in [-100, 100]");
    }
    sampling.logit_bias[static_cast<int32_t>(id)] = value.get<float>();
  }
  return Status::Ok();
}

Status ParseSampling(const json& body, const ParseLimits& limits, ApiRequest& out) {
  engine::SamplingParams& s = out.options.sampling;
  s.top_k = 0;
  s.min_p = 0.0f;
  s.repeat_penalty = 1.0f;
  COHORT_ASSIGN_OR_RETURN(double temperature, Number(body, "temperature", 0.0, 2.0, 1.0));
  COHORT_ASSIGN_OR_RETURN(double top_p, Number(body, "top_p", 0.0, 1.0, 1.0));
  COHORT_ASSIGN_OR_RETURN(double presence, Number(body, "presence_penalty", -2.0, 2.0, 0.0));
  COHORT_ASSIGN_OR_RETURN(double frequency, Number(body, "frequency_penalty", -2.0, 2.0, 0.0));
  COHORT_ASSIGN_OR_RETURN(int64_t seed, Integer(body, "seed", std::numeric_limits<int64_t>::min(),
                                                std::numeric_limits<int64_t>::max(),
                                                static_cast<int64_t>(limits.default_seed)));
  if (top_p == 0.0) return Bad("top_p", "must be in (0, 1]");
  s.temperature = static_cast<float>(temperature);
  s.top_p = static_cast<float>(top_p);
  s.presence_penalty = static_cast<float>(presence);
  s.frequency_penalty = static_cast<float>(frequency);
  // Penalties look at the whole sequence, as OpenAI's do.
  s.repeat_last_n = (presence != 0.0 || frequency != 0.0) ? -1 : 0;
  s.seed = static_cast<uint64_t>(seed);
  return ParseLogitBias(body, limits.n_vocab, s);
}

Status ParseLengthAndLogprobs(const json& body, Endpoint endpoint, const ParseLimits& limits,
                              ApiRequest& out) {
  const int64_t limit = limits.max_tokens_limit;
  bool has_mct = false;
  bool has_mt = false;
  const int64_t fallback = endpoint == Endpoint::kChat ? limits.default_max_tokens : std::min<int64_t>(16, limit);
  COHORT_ASSIGN_OR_RETURN(int64_t mct, Integer(body, "max_completion_tokens", 1, limit, fallback, &has_mct));
  COHORT_ASSIGN_OR_RETURN(int64_t mt, Integer(body, "max_tokens", 1, limit, fallback, &has_mt));
  out.options.max_tokens = static_cast<int32_t>(has_mct ? mct : mt);
  // llama.cpp's extension: generate to max_tokens whatever the model says (benchmarks).
  COHORT_ASSIGN_OR_RETURN(out.options.ignore_eos, Bool(body, "ignore_eos", false));
  COHORT_ASSIGN_OR_RETURN(int64_t n, Integer(body, "n", 1, kMaxChoices, 1));
  out.n = static_cast<int32_t>(n);
  if (endpoint == Endpoint::kChat) {
    COHORT_ASSIGN_OR_RETURN(out.logprobs, Bool(body, "logprobs", false));
    bool has_top = false;
    COHORT_ASSIGN_OR_RETURN(int64_t top, Integer(body, "top_logprobs", 0, engine::kMaxTopLogprobs, 0, &has_top));
    if (has_top && !out.logprobs) return Bad("top_logprobs", "requires logprobs: true");
    out.options.top_logprobs = out.logprobs ? static_cast<int32_t>(top) : -1;
  } else {
    bool has_lp = false;
    COHORT_ASSIGN_OR_RETURN(int64_t lp, Integer(body, "logprobs", 0, 5, 0, &has_lp));
    out.logprobs = has_lp;
    out.options.top_logprobs = has_lp ? static_cast<int32_t>(lp) : -1;
    COHORT_ASSIGN_OR_RETURN(bool echo, Bool(body, "echo", false));
    if (echo) return Bad("echo", "is not supported");
  }
  return Status::Ok();
}

Status ParseStreamAndFormat(const json& body, ApiRequest& out) {
  COHORT_ASSIGN_OR_RETURN(out.stream, Bool(body, "stream", false));
  auto so = body.find("stream_options");
  if (so != body.end() && !so->is_null()) {
    if (!so->is_object()) return Bad("stream_options", "must be an object");
    COHORT_ASSIGN_OR_RETURN(out.include_usage, Bool(*so, "include_usage", false));
  }
  auto rf = body.find("response_format");
  if (rf != body.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      return Bad("response_format", "must be an object with a string 'type'");
    }
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      out.json_mode = true;
    } else if (type != "text" && type != "json_schema") {
      return Bad("response_format", "type '" + type + "' is not supported (text, json_object, json_schema)");
    }
  }
  auto model = body.find("model");
  if (model != body.end() && !model->is_null()) {
    if (!model->is_string()) return Bad("model", "must be a string");
    out.model = model->get<std::string>();
  }
  return Status::Ok();
}

bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') return false;
  }
  return true;
}

Status ParseTools(const json& body, ApiRequest& out) {
  auto tools = body.find("tools");
  if (tools != body.end() && !tools->is_null()) {
    if (!tools->is_array()) return Bad("tools", "must be an array");
    if (tools->size() > kMaxTools) return Bad("tools", "at most " + std::to_string(kMaxTools) + " tools");
    for (size_t i = 0; i < tools->size(); ++i) {
      const json& t = (*tools)[i];
      const std::string param = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return Bad(param, "must be an object");
      if (!t.contains("type") || t["type"] != "function") return Bad(param + ".type", "must be \"function\"");
      if (!t.contains("function") || !t["function"].is_object()) return Bad(param + ".function", "is required (an object)");
      const json& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || !ValidToolName(fn["name"].get<std::string>())) {
        return Bad(param + ".function.name", "is required: 1-64 letters, digits, '_', '-' or '.'");
      }
      for (size_t j = 0; j < i; ++j) {
        if (out.tools[j]["function"]["name"] == fn["name"]) return Bad(param + ".function.name", "names a tool twice");
      }
      if (fn.contains("description") && !fn["description"].is_string()) return Bad(param + ".function.description", "must be a string");
      if (fn.contains("parameters")) {
        if (!fn["parameters"].is_object()) return Bad(param + ".function.parameters", "must be a JSON Schema object");
        // The schema must compile even when the call is not forced, so a bad one is found now.
        auto gbnf = engine::JsonSchemaToGbnf(fn["parameters"], param + ".function.parameters", false);
        if (!gbnf.ok()) return gbnf.status();
        auto g = engine::Grammar::Parse(*gbnf);
        if (!g.ok()) return Bad(param + ".function.parameters", g.status().message());
      }
      out.tools.push_back(t);
    }
  }
  auto choice = body.find("tool_choice");
  if (choice != body.end() && !choice->is_null()) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "auto") out.tool_choice = ToolChoice::kAuto;
      else if (c == "none") out.tool_choice = ToolChoice::kNone;
      else if (c == "required") out.tool_choice = ToolChoice::kRequired;
      else return Bad("tool_choice", "must be \"auto\", \"none\", \"required\" or a named function");
    } else if (choice->is_object() && choice->contains("function") && (*choice)["function"].is_object() &&
               (*choice)["function"].contains("name") && (*choice)["function"]["name"].is_string()) {
      out.tool_choice = ToolChoice::kNamed;
      out.tool_choice_name = (*choice)["function"]["name"].get<std::string>();
      const bool known = std::any_of(out.tools.begin(), out.tools.end(), [&](const json& t) {
        return t["function"]["name"] == out.tool_choice_name;
      });
      if (!known) return Bad("tool_choice", "names function '" + out.tool_choice_name + "', which is not in tools");
    } else {
      return Bad("tool_choice", "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if ((out.tool_choice == ToolChoice::kRequired) && out.tools.empty()) return Bad("tool_choice", "required needs tools");
  }
  COHORT_ASSIGN_OR_RETURN(out.parallel_tool_calls, Bool(body, "parallel_tool_calls", true));
  return Status::Ok();
}

Status CompileGrammar(const std::string& param, const std::string& gbnf, ApiRequest& out) {
  auto g = engine::Grammar::Parse(gbnf);
  if (!g.ok()) return Bad(param, g.status().message());
  out.grammar_source = gbnf;
  out.options.grammar = *g;
  return Status::Ok();
}

// The `grammar` field (llama-server's GBNF) and response_format json_schema / json_object.
Status ParseGrammar(const json& body, ApiRequest& out) {
  auto g = body.find("grammar");
  if (g != body.end() && !g->is_null()) {
    if (!g->is_string()) return Bad("grammar", "must be a string of GBNF");
    COHORT_RETURN_IF_ERROR(CompileGrammar("grammar", g->get<std::string>(), out));
  }
  auto rf = body.find("response_format");
  if (rf == body.end() || rf->is_null()) return Status::Ok();
  const std::string type = (*rf)["type"].get<std::string>();
  if (type == "text") return Status::Ok();
  if (out.options.grammar != nullptr) return Bad("response_format", "cannot be combined with grammar");
  if (type == "json_object") return CompileGrammar("response_format", engine::JsonObjectGbnf(), out);
  auto js = rf->find("json_schema");
  if (js == rf->end() || !js->is_object()) return Bad("response_format.json_schema", "is required (an object with a schema)");
  auto schema = js->find("schema");
  if (schema == js->end()) return Bad("response_format.json_schema.schema", "is required");
  if (js->contains("name") && !(*js)["name"].is_string()) return Bad("response_format.json_schema.name", "must be a string");
  auto gbnf = engine::JsonSchemaToGbnf(*schema, "response_format.json_schema.schema", true);
  if (!gbnf.ok()) return gbnf.status();
  return CompileGrammar("response_format.json_schema.schema", *gbnf, out);
}

}  // namespace

Result<ApiRequest> ParseApiRequest(Endpoint endpoint, std::string_view body_text, const ParseLimits& limits) {
  json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return InvalidArgument("body: not valid JSON (or not valid UTF-8)");
  if (!body.is_object()) return InvalidArgument("body: must be a JSON object");
  ApiRequest out;
  out.endpoint = endpoint;
  if (endpoint == Endpoint::kChat) {
    COHORT_RETURN_IF_ERROR(ParseMessages(body, out));
  } else {
    COHORT_RETURN_IF_ERROR(ParsePrompt(body, limits.n_vocab, out));
  }
  COHORT_RETURN_IF_ERROR(ParseStreamAndFormat(body, out));
  if (out.json_mode && endpoint != Endpoint::kChat) return Bad("response_format", "json_object is for chat completions");
  COHORT_RETURN_IF_ERROR(ParseGrammar(body, out));
  if (endpoint == Endpoint::kChat) COHORT_RETURN_IF_ERROR(ParseTools(body, out));
  COHORT_RETURN_IF_ERROR(ParseSampling(body, limits, out));
  COHORT_RETURN_IF_ERROR(ParseStop(body, out));
  COHORT_RETURN_IF_ERROR(ParseLengthAndLogprobs(body, endpoint, limits, out));
  return out;
}

}  // namespace cohort::server
