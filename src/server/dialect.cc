// The default token-count answer and the JSON helpers of dialect_json.h.
#include "server/dialect.h"

#include <httplib.h>

#include "server/dialect_json.h"

namespace cohort::server {

using nlohmann::json;

std::string Dialect::CountBody(int32_t prompt_tokens) const { return json{{"input_tokens", prompt_tokens}}.dump(); }

void SendDialectError(httplib::Response& res, const Dialect& dialect, const Status& status) {
  const ApiError error = HttpErrorOf(status);
  res.status = error.http_status;
  res.set_content(dialect.ErrorBody(error), "application/json");
}

Status RenameField(const Status& status, const std::vector<std::pair<std::string, std::string>>& field_names) {
  const std::string& message = status.message();
  for (const auto& [from, to] : field_names) {
    if (message.size() > from.size() + 1 && message.compare(0, from.size(), from) == 0 && message[from.size()] == ':') {
      return Status(status.code(), to + message.substr(from.size()));
    }
  }
  return status;
}

Status FieldError(const std::string& param, const std::string& why) { return InvalidArgument(param + ": " + why); }

Result<json> ParseObjectBody(std::string_view body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return InvalidArgument("body: not valid JSON (or not valid UTF-8)");
  if (!parsed.is_object()) return InvalidArgument("body: must be a JSON object");
  return parsed;
}

namespace {

const char* TypeName(json::value_t type) {
  switch (type) {
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer: return "an integer";
    default: return "a number";
  }
}

bool HasType(const json& value, json::value_t type) {
  switch (type) {
    case json::value_t::number_integer: return value.is_number_integer();
    case json::value_t::number_float: return value.is_number();
    default: return value.type() == type;
  }
}

}  // namespace

Result<const json*> OptionalField(const json& object, const char* key, const std::string& param, json::value_t type) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return static_cast<const json*>(nullptr);
  if (!HasType(*it, type)) return FieldError(param, std::string("must be ") + TypeName(type));
  return &*it;
}

std::string DumpJson(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string NamedEvent(const char* name, const json& data) {
  std::string event = "event: ";
  event += name;
  event += "\ndata: ";
  event += DumpJson(data);
  event += "\n\n";
  return event;
}

}  // namespace cohort::server
