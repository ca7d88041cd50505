// Field-by-field checks of OpenAI request bodies, with OpenAI's ranges and defaults
// (temperature and top_p 1, no top-k or min-p, completions' max_tokens 16).
#include "server/api_request.h"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "engine/stop.h"

namespace cohort::server {
namespace {

using nlohmann::json;

constexpr size_t kMaxMessages = 4096;
// OpenAI allows 4; autocomplete clients send more, and the engine takes 16.
constexpr size_t kMaxOpenAiStops = engine::kMaxStopStrings;
constexpr size_t kMaxLogitBias = 1024;

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
    out.messages.push_back({r, std::move(content)});
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
    } else if (type != "text") {
      return Bad("response_format", "type '" + type + "' is not supported (text, json_object)");
    }
  }
  auto model = body.find("model");
  if (model != body.end() && !model->is_null()) {
    if (!model->is_string()) return Bad("model", "must be a string");
    out.model = model->get<std::string>();
  }
  return Status::Ok();
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
  if (out.json_mode) {
    // JSON mode as plain instructions; like OpenAI, the conversation must ask for JSON itself.
    bool mentions_json = false;
    for (const auto& m : out.messages) mentions_json |= m.content.find("JSON") != std::string::npos ||
                                                        m.content.find("json") != std::string::npos;
    if (endpoint != Endpoint::kChat || !mentions_json) {
      return Bad("response_format", "json_object needs a chat whose messages ask for JSON");
    }
    out.messages.insert(out.messages.begin(),
                        {"system", "Respond only with a single valid JSON object, no other text."});
  }
  COHORT_RETURN_IF_ERROR(ParseSampling(body, limits, out));
  COHORT_RETURN_IF_ERROR(ParseStop(body, out));
  COHORT_RETURN_IF_ERROR(ParseLengthAndLogprobs(body, endpoint, limits, out));
  if (out.n > 1 && out.stream) return Bad("n", "more than one choice is supported without stream only");
  return out;
}

}  // namespace cohort::server
