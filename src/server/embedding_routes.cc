// Embeddings: the inputs checked, tokenized and embedded one after another on the instance's
// scheduler, and OpenAI's list of embeddings written. See embedding_routes.h.
#include "server/embedding_routes.h"

#include <httplib.h>
#include <openssl/evp.h>

#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_response.h"
#include "server/connection_probe.h"
#include "server/dialect.h"
#include "server/dialect_json.h"
#include "server/http_server.h"

namespace cohort::server {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on one request's inputs

// OpenAI's input: a string, an array of strings, an array of token ids, or an array of them.
Result<std::vector<EmbeddingInput>> OpenAiInputs(const json& input, int32_t n_vocab) {
  std::vector<EmbeddingInput> inputs;
  auto tokens_of = [n_vocab](const json& list, const std::string& param) -> Result<EmbeddingInput> {
    EmbeddingInput in;
    in.is_tokens = true;
    for (size_t i = 0; i < list.size(); ++i) {
      const json& id = list[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= n_vocab) {
        return FieldError(fmt::format("{}[{}]", param, i), fmt::format("must be a token id in [0, {})", n_vocab));
      }
      in.tokens.push_back(id.get<int32_t>());
    }
    if (in.tokens.empty()) return FieldError(param, "has no tokens");
    return in;
  };
  if (input.is_string()) {
    inputs.push_back({input.get<std::string>(), {}, false});
    return inputs;
  }
  if (!input.is_array() || input.empty()) {
    return FieldError("input", "must be a string, or a non-empty array of strings, token ids or arrays of token ids");
  }
  if (input.size() > kMaxInputs) return FieldError("input", fmt::format("at most {} inputs", kMaxInputs));
  if (input.front().is_number()) {
    COHORT_ASSIGN_OR_RETURN(EmbeddingInput in, tokens_of(input, "input"));
    inputs.push_back(std::move(in));
    return inputs;
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string param = fmt::format("input[{}]", i);
    if (input[i].is_string()) {
      inputs.push_back({input[i].get<std::string>(), {}, false});
    } else if (input[i].is_array()) {
      COHORT_ASSIGN_OR_RETURN(EmbeddingInput in, tokens_of(input[i], param));
      inputs.push_back(std::move(in));
    } else {
      return FieldError(param, "must be a string or an array of token ids");
    }
  }
  return inputs;
}

// The vector's float32 bytes (little-endian, as the openai client reads them) in base64.
std::string Base64Floats(const std::vector<float>& v) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  const int n = static_cast<int>(v.size() * sizeof(float));
  std::string out(static_cast<size_t>(4 * ((n + 2) / 3)), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes, n);
  out.resize(static_cast<size_t>(written));
  return out;
}

void HandleOpenAi(HttpServer& server, const httplib::Request& req, httplib::Response& res) {
  const std::shared_ptr<Dialect> dialect = MakeOpenAiDialect(Endpoint::kCompletion);  // OpenAI's error shape
  Result<json> body = ParseObjectBody(req.body);
  if (!body.ok()) return SendDialectError(res, *dialect, body.status());
  auto model = OptionalField(*body, "model", "model", json::value_t::string);
  if (!model.ok()) return SendDialectError(res, *dialect, model.status());
  const std::string name = *model != nullptr ? (*model)->get<std::string>() : "";
  std::shared_ptr<engine::ServingInstance> instance = server.LocalOrRelay(name, req, res, *dialect);
  if (instance == nullptr) return;
  auto fail = [&](const Status& status) { SendDialectError(res, *dialect, status); };
  const auto input = body->find("input");
  if (input == body->end() || input->is_null()) return fail(FieldError("input", "is required"));
  Result<std::vector<EmbeddingInput>> inputs = OpenAiInputs(*input, instance->model().config().n_vocab);
  if (!inputs.ok()) return fail(inputs.status());
  bool base64 = false;
  auto format = OptionalField(*body, "encoding_format", "encoding_format", json::value_t::string);
  if (!format.ok()) return fail(format.status());
  if (*format != nullptr) {
    const std::string f = (*format)->get<std::string>();
    if (f != "float" && f != "base64") return fail(FieldError("encoding_format", "must be \"float\" or \"base64\""));
    base64 = f == "base64";
  }
  EmbeddingOptions options;
  const ConnectionProbe probe = ConnectionProbe::Find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  options.client_gone = [&probe] { return probe.ClientGone(); };
  if (auto d = body->find("dimensions"); d != body->end() && !d->is_null()) {
    if (!d->is_number_integer()) return fail(FieldError("dimensions", "must be an integer"));
    options.dimensions = d->get<int64_t>();
    if (options.dimensions < 1) return fail(FieldError("dimensions", "must be at least 1"));
  }
  Result<Embeddings> embedded = Embed(*instance, *inputs, options);
  if (!embedded.ok()) return fail(embedded.status());
  json data = json::array();
  for (size_t i = 0; i < embedded->vectors.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    item["embedding"] = base64 ? json(Base64Floats(embedded->vectors[i])) : json(embedded->vectors[i]);
    data.push_back(std::move(item));
  }
  const std::string shown = name.empty() ? instance->name() : name;
  res.set_content(DumpJson({{"object", "list"},
                            {"data", std::move(data)},
                            {"model", shown},
                            {"usage", {{"prompt_tokens", embedded->prompt_tokens}, {"total_tokens", embedded->prompt_tokens}}}}),
                  kJson);
}

}  // namespace

Result<Embeddings> Embed(engine::ServingInstance& instance, const std::vector<EmbeddingInput>& inputs,
                         const EmbeddingOptions& options) {
  const engine::LoadedModel& model = instance.model();
  const int64_t n_embd = model.config().n_embd;
  if (options.dimensions < 0 || options.dimensions > n_embd) {
    return FieldError("dimensions", fmt::format("must be between 1 and the model's {}", n_embd));
  }
  model::Pooling pooling = model.config().pooling;
  if (pooling == model::Pooling::kNone) pooling = model::Pooling::kMean;  // a chat model: the mean
  if (pooling == model::Pooling::kRank) return Unsupported("embeddings: this is a reranking model (pooling_type rank)");
  engine::Scheduler& scheduler = instance.scheduler();
  auto param_of = [&](size_t i) { return inputs.size() == 1 ? std::string("input") : fmt::format("input[{}]", i); };
  std::vector<std::vector<int32_t>> ids(inputs.size());
  Embeddings out;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ids[i] = inputs[i].is_tokens ? inputs[i].tokens : model.tokenizer().Encode(inputs[i].text, true, true);
    if (ids[i].empty()) return FieldError(param_of(i), "has no tokens");
    if (static_cast<int64_t>(ids[i].size()) > scheduler.n_ctx()) {
      if (!options.truncate) {
        return OutOfRange(fmt::format("{}: has {} tokens; the context holds {}", param_of(i), ids[i].size(), scheduler.n_ctx()));
      }
      ids[i].resize(static_cast<size_t>(scheduler.n_ctx()));
    }
    out.prompt_tokens += static_cast<int64_t>(ids[i].size());
  }
  if (out.prompt_tokens > kMaxEmbeddingTokens) {
    return FieldError("input", fmt::format("has {} tokens in all; at most {} per request", out.prompt_tokens, kMaxEmbeddingTokens));
  }
  for (const std::vector<int32_t>& input : ids) {
    if (options.client_gone && options.client_gone()) return Cancelled("embeddings: the client closed the connection");
    Result<std::vector<float>> v = scheduler.Embed(input, pooling);
    if (!v.ok()) return v.status();
    if (options.dimensions > 0) v->resize(static_cast<size_t>(options.dimensions));
    if (options.normalize) {
      double norm = 0;
      for (float x : *v) norm += static_cast<double>(x) * x;
      norm = std::sqrt(norm);
      if (norm > 0) {
        for (float& x : *v) x = static_cast<float>(x / norm);
      }
    }
    out.vectors.push_back(std::move(*v));
  }
  return out;
}

void AddEmbeddingRoutes(HttpServer& server) {
  HttpServer* s = &server;
  server.routes().Post("/v1/embeddings", [s](const httplib::Request& req, httplib::Response& res) { HandleOpenAi(*s, req, res); });
}

}  // namespace cohort::server
