// Small JSON helpers the translation layers of the client APIs share (anthropic_routes.cc,
// ollama_routes.cc, responses_routes.cc): the body's parse, typed fields with errors that
// name them ("param: why", which HttpErrorOf turns into a 400 naming the field), and the
// named server-sent event both Anthropic's and the Responses API's streams use.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::server {

// "param: why" as a kInvalidArgument.
Status FieldError(const std::string& param, const std::string& why);
// The body as a JSON object, or why not ("body: ...").
Result<nlohmann::json> ParseObjectBody(std::string_view body);
// The field `key` of `object` when present and not null: its type checked, named `param`.
// Null when absent.
Result<const nlohmann::json*> OptionalField(const nlohmann::json& object, const char* key, const std::string& param,
                                            nlohmann::json::value_t type);
// JSON text of `value`, invalid UTF-8 in strings replaced rather than thrown on.
std::string DumpJson(const nlohmann::json& value);
// "event: NAME\ndata: {...}\n\n".
std::string NamedEvent(const char* name, const nlohmann::json& data);

}  // namespace cohort::server
