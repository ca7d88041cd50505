// Routes and request handling. Handlers run on cpp-httplib's worker threads; each generation
// is routed to its instance, submitted to that instance's scheduler and its output collected
// (or streamed as SSE) from its RequestHandle, or relayed to the node that serves it. No HTTP
// parsing here: cpp-httplib does it, with our size and time limits.
#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/anthropic_routes.h"
#include "server/api_response.h"
#include "server/connection_probe.h"
#include "server/ollama_routes.h"
#include "server/proxy.h"
#include "server/responses_routes.h"

namespace cohort::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPollInterval = std::chrono::milliseconds(200);
// How often a plain (non-streaming) request looks at its socket for a hung-up client.
constexpr auto kProbeInterval = std::chrono::milliseconds(100);
constexpr const char* kJson = "application/json";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Compares without an early exit: the time depends on the key's length only, not on how
// much of a guess is right.
bool SameKey(const std::string& given, const std::string& key) {
  unsigned diff = given.size() != key.size() ? 1u : 0u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0;
}

ApiError HttpError(int status) {
  ApiError e;
  e.http_status = status;
  e.type = status >= 500 ? "server_error" : "invalid_request_error";
  switch (status) {
    // cpp-httplib answers 400 itself for requests it cannot read (a malformed request line,
    // a chunked body past the size limit).
    case 400: e.message = "malformed HTTP request, or a body past the size limit"; break;
    case 404: e.message = "no such endpoint"; e.code = "not_found"; break;
    case 405: e.message = "method not allowed"; break;
    case 408: e.message = "request timed out"; break;
    case 413: e.message = "request body too large"; e.code = "request_too_large"; break;
    case 414: e.message = "request URI too long"; break;
    case 416: e.message = "range not satisfiable"; break;
    default: e.message = fmt::format("HTTP error {}", status); break;
  }
  return e;
}

// What a streaming response keeps between calls of its content provider.
struct StreamState {
  std::shared_ptr<engine::ServingInstance> instance;  // outlives the stream
  std::shared_ptr<engine::RequestHandle> handle;
  std::shared_ptr<Dialect> dialect;
  ResponseMeta meta;
  int32_t prompt_tokens = 0;
  bool first = true;
  bool saw_token = false;
  Clock::time_point start;
};

void SendIn(const Dialect& dialect, httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(dialect.ErrorBody(error), kJson);
}

void SendIn(const Dialect& dialect, httplib::Response& res, const Status& status) {
  SendIn(dialect, res, HttpErrorOf(status));
}

// Adds the CORS headers when `req` comes from an allowed origin, and answers its preflight
// (true: answered).
bool AllowCors(const std::vector<std::string>& origins, const httplib::Request& req, httplib::Response& res) {
  if (origins.empty() || !req.has_header("Origin")) return false;
  const std::string origin = req.get_header_value("Origin");
  bool any = false;
  bool allowed = false;
  for (const std::string& o : origins) {
    any = any || o == "*";
    allowed = allowed || o == origin;
  }
  if (!any && !allowed) return false;
  res.set_header("Access-Control-Allow-Origin", allowed ? origin : "*");
  if (!any) res.set_header("Vary", "Origin");
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers",
                 asked.empty() ? "Authorization, Content-Type, x-api-key, anthropic-version" : asked);
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

}  // namespace

void SendError(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(ErrorJson(error), kJson);
}

void SendStatus(httplib::Response& res, const Status& status) { SendError(res, HttpErrorOf(status)); }

bool Authorize(const std::vector<std::string>& keys, const httplib::Request& req, httplib::Response& res) {
  if (keys.empty()) return true;
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  // Anthropic's clients send the key as "x-api-key: KEY"; either header may carry it.
  const bool has_x_key = req.has_header("x-api-key");
  std::string key;
  bool given = has_x_key;
  if (has_x_key) {
    key = req.get_header_value("x-api-key");
  } else if (header.compare(0, prefix.size(), prefix) == 0) {
    key = header.substr(prefix.size());
    given = true;
  }
  bool valid = false;
  // Every key is compared, so the time does not say which one nearly matched.
  if (given) for (const std::string& k : keys) valid = SameKey(key, k) || valid;
  if (valid) return true;
  ApiError e;
  e.http_status = 401;
  e.type = "invalid_request_error";
  e.code = "invalid_api_key";
  e.message = header.empty() && !has_x_key ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                           : "invalid API key";
  if (req.path.rfind("/v1/messages", 0) == 0) {
    // Anthropic's clients read their own error shape.
    res.status = 401;
    res.set_content(nlohmann::json{{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", e.message}}}}.dump(),
                    kJson);
    return false;
  }
  SendError(res, e);
  return false;
}

HttpServer::HttpServer(const ServerOptions& options, Logger& log)
    : options_(options),
      log_(log),
      http_(std::make_unique<httplib::Server>()),
      seed_state_(std::random_device{}()) {
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.timeout_s, 0);
  http_->set_write_timeout(options_.timeout_s, 0);
  http_->set_keep_alive_timeout(options_.timeout_s);
  http_->set_keep_alive_max_count(100);
  http_->set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request&, httplib::Response& res) {
        if (res.body.empty()) res.set_content(ErrorJson(HttpError(res.status)), kJson);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http_->set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    log_.Error("server: a handler threw");
    SendStatus(res, Internal("internal error"));
  });
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.CountResponse(req.path, res.status);
  });
  // One check for every route but the open ones, before routing: an unknown path says no
  // more than a known one to a caller without a key.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // CORS before the key check: a browser's preflight carries no key.
    if (AllowCors(options_.cors_origins, req, res)) return httplib::Server::HandlerResponse::Handled;
    for (const std::string& open : options_.open_paths) {
      if (req.path == open) return httplib::Server::HandlerResponse::Unhandled;
    }
    return Authorize(options_.api_keys, req, res) ? httplib::Server::HandlerResponse::Unhandled
                                                  : httplib::Server::HandlerResponse::Handled;
  });
}

HttpServer::~HttpServer() { (void)Stop(); }

Result<int> HttpServer::Bind() {
  COHORT_RETURN_IF_ERROR(options_.Validate());
  if (options_.port == 0) {
    const int port = http_->bind_to_any_port(options_.host);
    if (port <= 0) return IoError("cannot bind " + options_.host);
    return port;
  }
  if (!http_->bind_to_port(options_.host, options_.port)) {
    return IoError(fmt::format("cannot bind {}:{}", options_.host, options_.port));
  }
  return options_.port;
}

Status HttpServer::Serve() {
  if (!http_->listen_after_bind()) return IoError("the HTTP server stopped with an error");
  return Status::Ok();
}

void HttpServer::Start() {
  COHORT_CHECK(!serve_thread_.joinable());
  serving_done_ = false;
  serve_thread_ = std::thread([this] {
    served_ = Serve();
    if (!served_.ok()) log_.Error("{}", served_.ToString());
    serving_done_ = true;
  });
}

Status HttpServer::Stop() {
  if (!serve_thread_.joinable()) {
    if (http_ != nullptr) http_->stop();
    return Status::Ok();
  }
  // A stop() that comes before the thread entered its listen loop does nothing: repeat it
  // until the loop has ended.
  while (!serving_done_) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  serve_thread_.join();
  return served_;
}

void HttpServer::ServeInstances(InstanceRouter& router, bool single_model) {
  router_ = &router;
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) { HandleMetrics(req, res); });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kChat, req, res);
  });
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    HandleGenerate(Endpoint::kCompletion, req, res);
  });
  // The other client APIs, translated onto the same generation path.
  AddAnthropicRoutes(*this);
  AddOllamaRoutes(*this);
  AddResponsesRoutes(*this);
  if (!single_model) return;
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", kJson);
  });
  const int64_t created = std::time(nullptr);  // when this server started serving the model
  auto model_json = [created](const std::string& id) {
    return nlohmann::json{{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "cohort"}};
  };
  http_->Get("/v1/models", [this, model_json](const httplib::Request&, httplib::Response& res) {
    auto target = router_->Route("");
    if (!target.ok() || target->local == nullptr) return SendStatus(res, target.status());
    res.set_content(nlohmann::json{{"object", "list"}, {"data", {model_json(target->local->name())}}}.dump(), kJson);
  });
  http_->Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    auto target = router_->Route("");
    if (!target.ok() || target->local == nullptr) return SendStatus(res, target.status());
    if (req.matches[1].str() != target->local->name()) {
      return SendStatus(res, NotFound("model: no model '" + req.matches[1].str() + "' (this server serves '" +
                                      target->local->name() + "')"));
    }
    res.set_content(model_json(target->local->name()).dump(), kJson);
  });
}

void HttpServer::Relay(const RouteTarget& target, const httplib::Request& req, httplib::Response& res) {
  if (req.has_header(kRelayedHeader)) {
    return SendStatus(res, Unavailable("this node does not serve the instance it was relayed (placement moved); try again"));
  }
  ProxyOptions proxy;
  proxy.read_timeout_s = options_.relay_timeout_s;
  proxy.upstream_lost = target.upstream_lost;
  ForwardRequest(target.upstream, req, res, proxy);
}

void HttpServer::HandleMetrics(const httplib::Request& req, httplib::Response& res) {
  auto target = router_->Route(req.has_param("model") ? req.get_param_value("model") : "");
  if (!target.ok()) return SendStatus(res, target.status());
  if (target->local == nullptr) return Relay(*target, req, res);
  res.set_content(metrics_.Render(target->local->scheduler().stats()), "text/plain; version=0.0.4");
}

ParseLimits HttpServer::Limits(engine::ServingInstance& instance) {
  ParseLimits limits;
  limits.n_vocab = instance.model().config().n_vocab;
  limits.max_tokens_limit = options_.max_tokens_limit > 0 ? options_.max_tokens_limit : instance.scheduler().n_ctx();
  limits.default_max_tokens = options_.default_max_tokens > 0 ? options_.default_max_tokens : limits.max_tokens_limit;
  // A fresh seed per request when none is given: splitmix64 over a random start.
  uint64_t z = seed_state_.fetch_add(0x9e3779b97f4a7c15ULL) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  limits.default_seed = z ^ (z >> 31);
  return limits;
}

Result<std::vector<int32_t>> HttpServer::PromptTokens(engine::ServingInstance& instance,
                                                      const ApiRequest& request) const {
  const engine::LoadedModel& model = instance.model();
  std::vector<int32_t> ids;
  if (request.endpoint == Endpoint::kChat) {
    const tokenizer::ChatTemplate* tmpl = instance.chat_template();
    if (tmpl == nullptr) {
      return InvalidArgument("this model has no chat template: use /v1/completions, or start the server "
                             "with --chat-template");
    }
    COHORT_ASSIGN_OR_RETURN(std::string text, model.RenderChat(request.messages, true, tmpl));
    ids = model.tokenizer().Encode(text, true, true);
  } else if (!request.prompt_tokens.empty()) {
    ids = request.prompt_tokens;
  } else {
    ids = model.tokenizer().Encode(request.prompt, true, true);
  }
  const int64_t limit =
      options_.max_prompt_tokens > 0 ? options_.max_prompt_tokens : instance.scheduler().n_ctx() - 1;
  if (static_cast<int64_t>(ids.size()) > limit) {
    return OutOfRange(fmt::format("the prompt has {} tokens; at most {} are accepted", ids.size(), limit));
  }
  if (ids.empty()) return InvalidArgument("prompt: has no tokens");
  return ids;
}

void HttpServer::HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  DialectCall call;
  call.endpoint = endpoint;
  call.openai_body = req.body;
  // Only the model's name decides the route: the full parse needs the instance's limits.
  if (const auto body = nlohmann::json::parse(req.body, nullptr, false); body.is_object()) {
    if (auto it = body.find("model"); it != body.end() && it->is_string()) call.model = it->get<std::string>();
  }
  call.dialect = MakeOpenAiDialect(endpoint);
  ServeDialect(req, res, std::move(call));
}

std::shared_ptr<engine::ServingInstance> HttpServer::LocalOrRelay(const std::string& model,
                                                                  const httplib::Request& req,
                                                                  httplib::Response& res, const Dialect& dialect) {
  auto target = router_->Route(model);
  if (!target.ok()) {
    SendIn(dialect, res, target.status());
    return nullptr;
  }
  if (target->local == nullptr) Relay(*target, req, res);
  return target->local;
}

void HttpServer::ServeDialect(const httplib::Request& req, httplib::Response& res, DialectCall call) {
  Dialect& dialect = *call.dialect;
  std::shared_ptr<engine::ServingInstance> instance = LocalOrRelay(call.model, req, res, dialect);
  if (instance == nullptr) return;
  Result<ApiRequest> parsed = ParseApiRequest(call.endpoint, call.openai_body, Limits(*instance));
  if (!parsed.ok()) return SendIn(dialect, res, RenameField(parsed.status(), call.field_names));
  ApiRequest& request = *parsed;
  if (call.refine) {
    const Status refined = call.refine(request);
    if (!refined.ok()) return SendIn(dialect, res, refined);
  }
  dialect.Prepare(request);
  Result<std::vector<int32_t>> prompt = PromptTokens(*instance, request);
  if (!prompt.ok()) return SendIn(dialect, res, prompt.status());
  const auto prompt_tokens = static_cast<int32_t>(prompt->size());
  if (call.count_only) return res.set_content(dialect.CountBody(prompt_tokens), kJson);
  std::vector<std::shared_ptr<engine::RequestHandle>> handles;
  for (int32_t i = 0; i < request.n; ++i) {
    engine::ScheduledRequest scheduled;
    scheduled.prompt = *prompt;
    scheduled.options = request.options;
    scheduled.options.sampling.seed += static_cast<uint64_t>(i);  // each choice its own sample
    auto handle = instance->scheduler().Submit(std::move(scheduled));
    if (!handle.ok()) {
      for (auto& h : handles) h->Cancel();
      return SendIn(dialect, res, handle.status());
    }
    handles.push_back(std::move(*handle));
  }
  if (request.stream) {
    Stream(std::move(instance), request, prompt_tokens, std::move(handles.front()), std::move(call.dialect), res);
  } else {
    Wait(*instance, request, req, handles, dialect, res);
  }
}

ResponseMeta HttpServer::MetaOf(engine::ServingInstance& instance, const ApiRequest& request, const Dialect& dialect) {
  ResponseMeta meta;
  meta.endpoint = request.endpoint;
  meta.id = fmt::format("{}{:016x}", dialect.IdPrefix(), next_id_++);
  meta.created = std::time(nullptr);
  meta.model = request.model.empty() ? instance.name() : request.model;
  meta.logprobs = request.logprobs;
  return meta;
}

void HttpServer::Wait(engine::ServingInstance& instance, const ApiRequest& request, const httplib::Request& req,
                      const std::vector<std::shared_ptr<engine::RequestHandle>>& handles, Dialect& dialect,
                      httplib::Response& res) {
  const auto start = Clock::now();
  // The whole answer is written only at the end, so a client that goes away is seen on its
  // socket, not by a failed write.
  const ConnectionProbe probe =
      ConnectionProbe::Find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  auto next_probe = start + kProbeInterval;
  std::vector<engine::RequestOutput> totals(handles.size());
  bool saw_token = false;
  for (size_t i = 0; i < handles.size(); ++i) {
    engine::RequestOutput& total = totals[i];
    engine::RequestHandle& handle = *handles[i];
    while (!total.done) {
      engine::RequestOutput part;
      const bool got = handle.Wait(part, kProbeInterval);
      if (Clock::now() >= next_probe) {
        next_probe = Clock::now() + kProbeInterval;
        if (probe.ClientGone()) {
          for (const auto& h : handles) h->Cancel();
          ApiError gone;
          gone.http_status = 499;  // nobody reads it; the access log and metrics do
          gone.type = "invalid_request_error";
          gone.message = "the client closed the connection";
          return SendIn(dialect, res, gone);
        }
      }
      if (!got) continue;
      if (!saw_token && !part.tokens.empty()) {
        saw_token = true;
        metrics_.ObserveTimeToFirstToken(SecondsSince(start));
      }
      metrics_.AddGeneratedTokens(static_cast<int64_t>(part.tokens.size()));
      total.Append(std::move(part));
    }
    if (!total.status.ok()) {
      for (const auto& h : handles) h->Cancel();
      return SendIn(dialect, res, total.status);
    }
  }
  const ResponseMeta meta = MetaOf(instance, request, dialect);
  const tokenizer::Tokenizer& tok = instance.model().tokenizer();
  res.set_content(totals.size() == 1 ? dialect.Whole(meta, totals.front(), tok) : dialect.WholeChoices(meta, totals, tok),
                  kJson);
}

void HttpServer::Stream(std::shared_ptr<engine::ServingInstance> instance, const ApiRequest& request,
                        int32_t prompt_tokens, std::shared_ptr<engine::RequestHandle> handle,
                        std::shared_ptr<Dialect> dialect, httplib::Response& res) {
  auto state = std::make_shared<StreamState>();
  state->meta = MetaOf(*instance, request, *dialect);
  state->instance = std::move(instance);
  state->handle = std::move(handle);
  state->dialect = std::move(dialect);
  state->prompt_tokens = prompt_tokens;
  state->start = Clock::now();
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      state->dialect->StreamType(),
      [this, state](size_t, httplib::DataSink& sink) {
        engine::RequestOutput out;
        if (!state->handle->Wait(out, kPollInterval)) {
          // Nothing new: notice a client that went away even while no token is ready.
          if (!sink.is_writable()) {
            state->handle->Cancel();
            return false;
          }
          return true;
        }
        if (!state->saw_token && !out.tokens.empty()) {
          state->saw_token = true;
          metrics_.ObserveTimeToFirstToken(SecondsSince(state->start));
        }
        metrics_.AddGeneratedTokens(static_cast<int64_t>(out.tokens.size()));
        std::string events;
        Dialect& dialect = *state->dialect;
        const tokenizer::Tokenizer& tok = state->instance->model().tokenizer();
        if (out.done && !out.status.ok()) {
          events = dialect.StreamError(HttpErrorOf(out.status));
        } else {
          if (state->first) events += dialect.StreamStart(state->meta, state->prompt_tokens, tok);
          state->first = false;
          engine::RequestOutput body = out;
          body.done = false;
          events += dialect.StreamPiece(state->meta, body, tok);
          if (out.done) events += dialect.StreamEnd(state->meta, out, tok);
        }
        if (!events.empty() && !sink.write(events.data(), events.size())) {
          state->handle->Cancel();
          return false;
        }
        if (out.done) sink.done();
        return true;
      },
      [state](bool) { state->handle->Cancel(); });
}

}  // namespace cohort::server
