// ApiClient over cpp-httplib's client; see api_client.h.
#include "server/api_client.h"

#include <httplib.h>

#include <fmt/format.h>

namespace cohort::server {

Result<nlohmann::json> ApiClient::Call(const std::string& method, const std::string& path, const nlohmann::json& body,
                                       int wait_s) const {
  if (options_.url.rfind("http://", 0) != 0 && options_.url.rfind("https://", 0) != 0) {
    return InvalidArgument("--api '" + options_.url + "': give http://HOST:PORT");
  }
  httplib::Client client(options_.url);
  client.set_connection_timeout(options_.timeout_s, 0);
  client.set_read_timeout(options_.timeout_s + wait_s, 0);
  httplib::Headers headers;
  if (!options_.api_key.empty()) headers.emplace("Authorization", "Bearer " + options_.api_key);
  const std::string payload = body.is_null() ? "" : body.dump();
  httplib::Result res = method == "GET"    ? client.Get(path.c_str(), headers)
                        : method == "POST" ? client.Post(path.c_str(), headers, payload, "application/json")
                                           : client.Delete(path.c_str(), headers, payload, "application/json");
  if (!res) {
    return Unavailable(fmt::format("no answer from {} ({}): is `cohort serve --cluster` running there?", options_.url,
                                   httplib::to_string(res.error())));
  }
  const nlohmann::json answer = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status >= 200 && res->status < 300) {
    if (answer.is_discarded()) return Corrupt(fmt::format("{} {}: the answer is not JSON", method, path));
    return answer;
  }
  std::string message = res->body.substr(0, 500);
  if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
    message = answer["error"].value("message", message);
  }
  const std::string text = fmt::format("HTTP {}: {}", res->status, message);
  switch (res->status) {
    case 400: return InvalidArgument(text);
    case 401: return InvalidArgument(text + " (give --api-key)");
    case 404: return NotFound(text);
    default: return Unavailable(text);
  }
}

}  // namespace cohort::server
