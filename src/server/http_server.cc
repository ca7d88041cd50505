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

#include "server/api_response.h"
#include "server/connection_probe.h"
#include "server/proxy.h"
#include "server/request_log.h"

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
  ResponseMeta meta;
  bool include_usage = false;
  bool first = true;
  bool saw_token = false;
  Clock::time_point start;
};

// The final counts of a generation, for its request log line.
void NoteTokens(const engine::RequestOutput& done) {
  RequestLogEntry& e = CurrentRequestLog();
  e.prompt_tokens = done.prompt_tokens;
  e.cached_tokens = done.cached_tokens;
  e.completion_tokens = done.completion_tokens;
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
  bool valid = false;
  if (header.compare(0, prefix.size(), prefix) == 0) {
    const std::string key = header.substr(prefix.size());
    // Every key is compared, so the time does not say which one nearly matched.
    for (const std::string& k : keys) valid = SameKey(key, k) || valid;
  }
  if (valid) return true;
  ApiError e;
  e.http_status = 401;
  e.type = "invalid_request_error";
  e.code = "invalid_api_key";
  e.message = header.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key";
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
  // cpp-httplib's default options add SO_REUSEPORT, which lets a second server bind a port
  // in use and the kernel then splits connections between the two: SO_REUSEADDR alone
  // (a restart need not wait out TIME_WAIT) makes a taken port a bind error.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const void*>(&yes), sizeof(yes));
  });
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
    if (!options_.request_log) return;
    const std::string line = RequestLogLine(req.method, req.path, res.status,
                                            req.remote_addr + ":" + std::to_string(req.remote_port), CurrentRequestLog());
    if (req.method == "GET" && res.status < 400) {
      log_.Debug("request {}", line);
    } else {
      log_.Record("request", line);
    }
    BeginRequestLog();  // a request that never reaches routing (malformed) must not show this one's fields
  });
  // One check for every route but the open ones, before routing: an unknown path says no
  // more than a known one to a caller without a key.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    BeginRequestLog();
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
    return IoError(fmt::format("cannot listen on {}:{}: the port is in use (another cohort serve?) or the "
                               "address is not this machine's", options_.host, options_.port));
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
  if (!single_model) return;
  http_->Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", kJson);
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    auto target = router_->Route("");
    if (!target.ok() || target->local == nullptr) return SendStatus(res, target.status());
    res.set_content(fmt::format(R"({{"object":"list","data":[{{"id":{},"object":"model","created":{},"owned_by":"cohort"}}]}})",
                                nlohmann::json(target->local->name()).dump(), std::time(nullptr)),
                    kJson);
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
  // Only the model's name decides the route: the full parse needs the instance's limits.
  std::string model;
  if (const auto body = nlohmann::json::parse(req.body, nullptr, false); body.is_object()) {
    if (auto it = body.find("model"); it != body.end() && it->is_string()) model = it->get<std::string>();
  }
  auto target = router_->Route(model);
  RequestLogEntry& log_entry = CurrentRequestLog();
  log_entry.model = model;
  if (!target.ok()) return SendStatus(res, target.status());
  if (target->local == nullptr) {
    log_entry.upstream = target->upstream;
    return Relay(*target, req, res);
  }
  engine::ServingInstance& instance = *target->local;
  log_entry.model = instance.name();
  Result<ApiRequest> parsed = ParseApiRequest(endpoint, req.body, Limits(instance));
  if (!parsed.ok()) return SendStatus(res, parsed.status());
  ApiRequest& request = *parsed;
  Result<std::vector<int32_t>> prompt = PromptTokens(instance, request);
  if (!prompt.ok()) return SendStatus(res, prompt.status());
  engine::ScheduledRequest scheduled;
  scheduled.prompt = std::move(*prompt);
  scheduled.options = request.options;
  auto handle = instance.scheduler().Submit(std::move(scheduled));
  if (!handle.ok()) return SendStatus(res, handle.status());
  if (request.stream) {
    Stream(instance, target->local, request, std::move(*handle), res);
  } else {
    Wait(instance, request, req, **handle, res);
  }
}

void HttpServer::Wait(engine::ServingInstance& instance, const ApiRequest& request, const httplib::Request& req,
                      engine::RequestHandle& handle, httplib::Response& res) {
  const auto start = Clock::now();
  // The whole answer is written only at the end, so a client that goes away is seen on its
  // socket, not by a failed write.
  const ConnectionProbe probe =
      ConnectionProbe::Find({req.local_addr, req.local_port, req.remote_addr, req.remote_port});
  auto next_probe = start + kProbeInterval;
  engine::RequestOutput total;
  bool saw_token = false;
  while (!total.done) {
    engine::RequestOutput part;
    const bool got = handle.Wait(part, kProbeInterval);
    if (Clock::now() >= next_probe) {
      next_probe = Clock::now() + kProbeInterval;
      if (probe.ClientGone()) {
        handle.Cancel();
        ApiError gone;
        gone.http_status = 499;  // nobody reads it; the access log and metrics do
        gone.type = "invalid_request_error";
        gone.message = "the client closed the connection";
        return SendError(res, gone);
      }
    }
    if (!got) continue;
    if (!saw_token && !part.tokens.empty()) {
      saw_token = true;
      metrics_.ObserveTimeToFirstToken(SecondsSince(start));
      CurrentRequestLog().ttft_s = SecondsSince(CurrentRequestLog().start);
    }
    metrics_.AddGeneratedTokens(static_cast<int64_t>(part.tokens.size()));
    total.Append(std::move(part));
  }
  NoteTokens(total);
  if (!total.status.ok()) return SendStatus(res, total.status);
  ResponseMeta meta;
  meta.endpoint = request.endpoint;
  meta.id = fmt::format("{}-{:016x}", request.endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", next_id_++);
  meta.created = std::time(nullptr);
  meta.model = request.model.empty() ? instance.name() : request.model;
  meta.logprobs = request.logprobs;
  res.set_content(CompletionJson(meta, total, instance.model().tokenizer()), kJson);
}

void HttpServer::Stream(engine::ServingInstance& instance, std::shared_ptr<engine::ServingInstance> keep,
                        const ApiRequest& request, std::shared_ptr<engine::RequestHandle> handle,
                        httplib::Response& res) {
  auto state = std::make_shared<StreamState>();
  state->instance = std::move(keep);
  state->handle = std::move(handle);
  state->include_usage = request.include_usage;
  state->start = Clock::now();
  ResponseMeta& meta = state->meta;
  meta.endpoint = request.endpoint;
  meta.id = fmt::format("{}-{:016x}", request.endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl", next_id_++);
  meta.created = std::time(nullptr);
  meta.model = request.model.empty() ? instance.name() : request.model;
  meta.logprobs = request.logprobs;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
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
          CurrentRequestLog().ttft_s = SecondsSince(CurrentRequestLog().start);
        }
        if (out.done) NoteTokens(out);
        metrics_.AddGeneratedTokens(static_cast<int64_t>(out.tokens.size()));
        std::string events;
        const tokenizer::Tokenizer& tok = state->instance->model().tokenizer();
        if (out.done && !out.status.ok()) {
          events = ErrorEvent(HttpErrorOf(out.status));
        } else {
          if (state->first && state->meta.endpoint == Endpoint::kChat) {
            events += ChunkEvent(state->meta, engine::RequestOutput{}, tok, true);
          }
          state->first = false;
          engine::RequestOutput body = out;
          body.done = false;
          if (!body.text.empty() || !body.logprobs.empty()) events += ChunkEvent(state->meta, body, tok, false);
          if (out.done) {
            engine::RequestOutput last;
            last.done = true;
            last.finish_reason = out.finish_reason;
            events += ChunkEvent(state->meta, last, tok, false);
            if (state->include_usage) events += UsageEvent(state->meta, out.prompt_tokens, out.completion_tokens, out.cached_tokens);
          }
        }
        if (out.done) events += "data: [DONE]\n\n";
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
