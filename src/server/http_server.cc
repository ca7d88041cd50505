// Routes and request handling. Handlers run on cpp-httplib's worker threads; each generation
// is routed to its instance, submitted to that instance's scheduler and its output collected
// (or streamed as SSE) from its RequestHandle, or relayed to the node that serves it. No HTTP
// parsing here: cpp-httplib does it, with our size and time limits.
#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "server/api_keys.h"
#include "server/anthropic_routes.h"
#include "server/api_response.h"
#include "server/http_front.h"
#include "server/connection_probe.h"
#include "server/embedding_routes.h"
#include "server/ollama_routes.h"
#include "server/proxy.h"
#include "server/relay_channel.h"
#include "server/resuming_relay.h"
#include "server/responses_routes.h"
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

// How long a stream of several choices waits on one of them before looking at the others.
// The choices share forward passes, so their tokens come within one step of each other and a
// short wait delays none by much; a stream of one choice waits kPollInterval.
constexpr auto kChoicePollInterval = std::chrono::milliseconds(10);

// One choice of a streaming response (OpenAI's n; one for every other request).
struct StreamChoice {
  std::shared_ptr<engine::RequestHandle> handle;
  ResponseMeta meta;     // the response's, with this choice's index in meta.choice
  bool started = false;  // the dialect's StreamStart went out for it
  bool done = false;
};

// What a streaming response keeps between calls of its content provider.
struct StreamState {
  std::shared_ptr<engine::ServingInstance> instance;  // outlives the stream
  std::vector<StreamChoice> choices;
  std::shared_ptr<Dialect> dialect;
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // of the choices that have ended
  size_t choices_done = 0;
  bool saw_token = false;
  Clock::time_point start;

  void CancelAll() {
    for (StreamChoice& c : choices) c.handle->Cancel();
  }
};

void SendIn(const Dialect& dialect, httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(dialect.ErrorBody(error), kJson);
}

void SendIn(const Dialect& dialect, httplib::Response& res, const Status& status) {
  SendIn(dialect, res, HttpErrorOf(status));
}

// The key a request carries, as "Bearer KEY": Anthropic's clients send "x-api-key: KEY".
std::string KeyHeaderOf(const httplib::Request& req) {
  std::string header = req.get_header_value("Authorization");
  if (header.empty() && req.has_header("x-api-key")) header = "Bearer " + req.get_header_value("x-api-key");
  return header;
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

// The final counts of a request, for its request log line: the prompt of its first choice
// (all share it) and the tokens of all its choices.
void NoteTokens(const engine::RequestOutput& first, int32_t completion_tokens) {
  RequestLogEntry& e = CurrentRequestLog();
  e.prompt_tokens = first.prompt_tokens;
  e.cached_tokens = first.cached_tokens;
  e.completion_tokens = completion_tokens;
}

}  // namespace

void SendError(httplib::Response& res, const ApiError& error) {
  res.status = error.http_status;
  res.set_content(ErrorJson(error), kJson);
}

void SendStatus(httplib::Response& res, const Status& status) { SendError(res, HttpErrorOf(status)); }

HttpServer::HttpServer(const ServerOptions& options, Logger& log)
    : options_(options), log_(log), seed_state_(std::random_device{}()) {
  // What cannot load here (a key file, TLS files) makes Bind() fail: no server runs without them.
  auto keys = ApiKeys::Load(options_.api_keys, options_.api_key_file, options_.rate_limit);
  if (!keys.ok()) init_ = keys.status();
  keys_ = keys.ok() ? std::move(*keys) : ApiKeys::Load({}, "", {}).value();
  auto front = HardenedServer::Create(options_.front);
  if (!front.ok() && init_.ok()) init_ = front.status();
  http_ = front.ok() ? std::move(*front) : HardenedServer::Create(FrontOptions{}).value();
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
    // By the key's name: the key itself is never written anywhere.
    const auto key_name = keys_->Match(KeyHeaderOf(req));
    const std::string line = RequestLogLine(req.method, req.path, res.status,
                                            req.remote_addr + ":" + std::to_string(req.remote_port), CurrentRequestLog()) +
                             " key=" + key_name.value_or("-");
    if (req.method == "GET" && res.status < 400) {
      log_.Info("request {}", line);  // polling (the dashboard's) would flood the default log
    } else {
      log_.Record("request", line);
    }
    BeginRequestLog();  // a request that never reaches routing (malformed) must not show this one's fields
  });
  // One check for every route but the open ones, before routing: an unknown path says no
  // more than a known one to a caller without a key.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    BeginRequestLog();
    // CORS before the key check: a browser's preflight carries no key.
    if (AllowCors(options_.cors_origins, req, res)) return httplib::Server::HandlerResponse::Handled;
    for (const std::string& open : options_.open_paths) {
      if (req.path == open) return httplib::Server::HandlerResponse::Unhandled;
    }
    return Admit(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
  });
}

namespace {

// A request answered before its body was read: its connection is not reused, or the unread
// body would be taken for the next request.
void RefuseUnread(const httplib::Request& req, httplib::Response& res) {
  if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) return;
  res.set_header("Connection", "close");
  HardenedServer::CloseAfterThisResponse();
}

}  // namespace

bool HttpServer::Admit(const httplib::Request& req, httplib::Response& res) {
  std::string who = "address " + req.remote_addr;  // the caller, where no keys are set
  if (!keys_->open()) {
    const std::string header = KeyHeaderOf(req);
    const auto name = keys_->Match(header);
    if (!name.has_value()) {
      ApiError e;
      e.http_status = 401;
      e.type = "invalid_request_error";
      e.code = "invalid_api_key";
      e.message = header.empty() ? "missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                                 : "invalid API key";
      if (req.path.rfind("/v1/messages", 0) == 0) {  // Anthropic's clients read their own shape
        res.status = 401;
        res.set_content(nlohmann::json{{"type", "error"}, {"error", {{"type", "authentication_error"}, {"message", e.message}}}}.dump(),
                        kJson);
      } else {
        SendError(res, e);
      }
      RefuseUnread(req, res);
      return false;
    }
    who = "key " + *name;
  }
  double retry_s = 0;
  if (keys_->Admit(who, &retry_s)) return true;
  ApiError e;
  e.http_status = 429;
  e.type = "rate_limit_error";
  e.code = "rate_limit_exceeded";
  e.message = "rate limit reached for this key; retry later";
  res.set_header("Retry-After", std::to_string(static_cast<int64_t>(std::ceil(retry_s))));
  SendError(res, e);
  RefuseUnread(req, res);
  return false;
}

Status HttpServer::ReloadKeys() {
  const Status st = keys_->Reload();
  if (st.ok()) log_.Info("API keys reloaded: {} keys", keys_->size());
  return st;
}

bool HttpServer::tls() const { return http_->tls(); }

HttpServer::~HttpServer() { (void)Stop(); }

Result<int> HttpServer::Bind() {
  COHORT_RETURN_IF_ERROR(init_);
  COHORT_RETURN_IF_ERROR(options_.Validate());
  int port = options_.port;
  if (options_.port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port <= 0) return IoError("cannot bind " + options_.host);
  } else if (!http_->bind_to_port(options_.host, options_.port)) {
    return IoError(fmt::format("cannot listen on {}:{}: the port is in use (another cohort serve?) or the "
                               "address is not this machine's", options_.host, options_.port));
  }
  COHORT_RETURN_IF_ERROR(http_->RaiseBacklog());
  if (!options_.relay_listen.empty()) {
    RelayListenerOptions relay;
    relay.listen = options_.relay_listen;
    relay.key = *options_.relay_key;
    relay.admit_host = options_.relay_admit_host;
    relay.handshake_timeout_s = std::min(options_.front.request_deadline_s, 5);
    auto bound = RelayListener::Bind(relay, *http_);
    if (!bound.ok() && options_.relay_listen_may_move) {
      const std::string wanted = relay.listen;
      relay.listen = wanted.substr(0, wanted.rfind(':')) + ":0";
      auto moved = RelayListener::Bind(relay, *http_);
      if (moved.ok()) {
        log_.Warn("the relay port {} is not free ({}); relaying on port {} instead: a firewall that opens only "
                  "the documented ports will block it (pass --relay-listen to fix the port)",
                  wanted, bound.status().ToString(), (*moved)->port());
        bound = std::move(moved);
      }
    }
    if (!bound.ok()) return bound.status();
    relay_ = std::move(*bound);
  }
  return port;
}

int HttpServer::relay_port() const { return relay_ != nullptr ? relay_->port() : 0; }

Status HttpServer::Serve() {
  if (!http_->listen_after_bind()) return IoError("the HTTP server stopped with an error");
  return Status::Ok();
}

void HttpServer::Start() {
  COHORT_CHECK(!serve_thread_.joinable());
  serving_done_ = false;
  if (relay_ != nullptr) relay_->Start();
  serve_thread_ = std::thread([this] {
    served_ = Serve();
    if (!served_.ok()) log_.Error("{}", served_.ToString());
    serving_done_ = true;
  });
}

Status HttpServer::Stop() {
  // The relay's connections end once the server has stopped (they wait on it between requests).
  if (!serve_thread_.joinable()) {
    if (http_ != nullptr) http_->stop();
    if (relay_ != nullptr) relay_->Stop();
    return Status::Ok();
  }
  // A stop() that comes before the thread entered its listen loop does nothing: repeat it
  // until the loop has ended.
  while (!serving_done_) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  serve_thread_.join();
  if (relay_ != nullptr) relay_->Stop();
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
  AddEmbeddingRoutes(*this);
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
  proxy.key = options_.relay_key;
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
                                                      const ApiRequest& request, bool* opens_think) const {
  const engine::LoadedModel& model = instance.model();
  std::vector<int32_t> ids;
  if (request.endpoint == Endpoint::kChat) {
    const tokenizer::ChatTemplate* tmpl = instance.chat_template();
    if (tmpl == nullptr) {
      return InvalidArgument("this model has no chat template: use /v1/completions, or start the server "
                             "with --chat-template");
    }
    const bool tools = !request.tools.empty() && request.tool_choice != ToolChoice::kNone;
    COHORT_ASSIGN_OR_RETURN(std::string text,
                            model.RenderChat(request.messages, true, tmpl, tools ? request.tools.dump() : std::string()));
    if (opens_think != nullptr) {
      const size_t end = text.find_last_not_of(" \n\r\t");
      *opens_think = end != std::string::npos && end >= 6 && text.compare(end - 6, 7, "<think>") == 0;
    }
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

Status HttpServer::PrepareTools(engine::ServingInstance& instance, ApiRequest& request) const {
  if (request.endpoint != Endpoint::kChat || request.tools.empty() || request.tool_choice == ToolChoice::kNone) {
    return Status::Ok();
  }
  const tokenizer::ChatTemplate* tmpl = instance.chat_template();
  request.tool_format = DetectToolFormat(tmpl != nullptr ? tmpl->source() : "");
  request.options.render_special = true;  // the markers must reach the parser
  if (request.tool_choice == ToolChoice::kAuto) return Status::Ok();
  if (request.options.grammar != nullptr) return InvalidArgument("tool_choice: a forced tool call cannot be combined with grammar or response_format");
  COHORT_ASSIGN_OR_RETURN(std::string gbnf, ForcedToolCallGrammar(request.tool_format, request.tools,
                                                                   request.tool_choice == ToolChoice::kNamed ? request.tool_choice_name : ""));
  auto grammar = engine::Grammar::Parse(gbnf);
  if (!grammar.ok()) return InvalidArgument("tools: " + grammar.status().message());
  request.options.grammar = *grammar;
  return Status::Ok();
}

void HttpServer::HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  DialectCall call;
  call.endpoint = endpoint;
  call.openai_body = req.body;
  // Only the model's name decides the route: the full parse needs the instance's limits.
  bool stream = false;
  bool one_choice = true;
  const auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (body.is_object()) {
    if (auto it = body.find("model"); it != body.end() && it->is_string()) call.model = it->get<std::string>();
    if (auto it = body.find("stream"); it != body.end() && it->is_boolean()) stream = it->get<bool>();
    if (auto it = body.find("n"); it != body.end() && it->is_number()) one_choice = it->get<double>() <= 1;
  }
  // On a cluster the node the client reached keeps a stream, to resume it elsewhere when the
  // node serving it is lost (resuming_relay.h). Resuming follows one choice's tokens: a stream
  // of several choices is relayed plainly, and ends with an error event when its node is lost.
  if (stream && one_choice && router_->ResumesStreams() && !req.has_header(kRelayedHeader)) {
    ResumeOptions resume;
    resume.read_timeout_s = options_.relay_timeout_s;
    resume.key = options_.relay_key;
    return RelayResumable(*router_, call.model, req, res, resume);
  }
  call.dialect = MakeOpenAiDialect(endpoint);
  call.writes_tool_calls = true;
  ServeDialect(req, res, std::move(call));
}

std::shared_ptr<engine::ServingInstance> HttpServer::LocalOrRelay(const std::string& model,
                                                                  const httplib::Request& req,
                                                                  httplib::Response& res, const Dialect& dialect) {
  auto target = router_->Route(model);
  RequestLogEntry& log_entry = CurrentRequestLog();
  log_entry.model = model;
  if (!target.ok()) {
    SendIn(dialect, res, target.status());
    return nullptr;
  }
  if (target->local == nullptr) {
    log_entry.upstream = target->upstream;
    Relay(*target, req, res);
    return nullptr;
  }
  log_entry.model = target->local->name();
  return target->local;
}

// A request whose answer is a 503 before anything was sent is tried again on the instance's
// next placement (ServeDialect), this many times at most and within this long. A client has
// seen nothing of such an answer, so at temperature 0 the retried one is the undisturbed one;
// the response says how often it was retried (kRetriesHeader).
constexpr int kMaxPlacementRetries = 8;
constexpr auto kPlacementRetryWindow = std::chrono::seconds(60);
constexpr const char* kRetriesHeader = "X-Cohort-Retries";

void HttpServer::ServeDialect(const httplib::Request& req, httplib::Response& res, DialectCall call) {
  // A relayed request is answered once: the node the client reached does the retrying.
  if (!router_->ResumesStreams() || req.has_header(kRelayedHeader)) return ServeOnce(req, res, std::move(call));
  const auto deadline = Clock::now() + kPlacementRetryWindow;
  const httplib::Response fresh = res;  // as the handler got it (the pre-routing headers)
  for (int retries = 0;; ++retries) {
    Result<RouteTarget> before = router_->Route(call.model);
    ServeOnce(req, res, call);
    // Only a request that had a placement to lose is retried: one routed nowhere (loading,
    // unplaced) is answered at once, as before.
    // (A 503 is always a whole answer: a stream that started is a 200.)
    const bool lost = res.status == 503 && before.ok() && before->epoch > 0;
    if (!lost || retries == kMaxPlacementRetries || !WaitForPlacementAfter(call.model, before->epoch, deadline)) {
      if (retries > 0) res.set_header(kRetriesHeader, std::to_string(retries));
      return;
    }
    log_.Info("request {} {}: {}; trying it again on the instance's next placement", req.method, req.path,
              res.body.substr(0, 200));
    res = fresh;
  }
}

bool HttpServer::WaitForPlacementAfter(const std::string& model, uint64_t epoch, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    Result<RouteTarget> t = router_->Route(model);
    if (t.ok() && t->epoch > epoch) return true;
    if (!t.ok() && NoPlacementComing(t.status())) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
  return false;
}

void HttpServer::ServeOnce(const httplib::Request& req, httplib::Response& res, DialectCall call) {
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
  Result<std::vector<int32_t>> prompt = PromptTokens(*instance, request, &request.opens_think);
  if (!prompt.ok()) return SendIn(dialect, res, prompt.status());
  if (req.has_header(kRelayedHeader)) {  // a resumed stream: its tokens so far follow the prompt
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    Result<std::vector<int32_t>> resumed = ResumeTokensOf(body, instance->model().config().n_vocab);
    if (!resumed.ok()) return SendIn(dialect, res, resumed.status());
    prompt->insert(prompt->end(), resumed->begin(), resumed->end());
    request.options.max_tokens = std::max<int32_t>(0, request.options.max_tokens - static_cast<int32_t>(resumed->size()));
  }
  const auto prompt_tokens = static_cast<int32_t>(prompt->size());
  if (call.count_only) return res.set_content(dialect.CountBody(prompt_tokens), kJson);
  // Forced calls and parsed tool_calls: the dialects that write parsed calls (OpenAI's). The
  // others render the tools into the prompt and return the text as it comes.
  if (call.writes_tool_calls) {
    const Status tools = PrepareTools(*instance, request);
    if (!tools.ok()) return SendIn(dialect, res, tools);
  }
  // The vocabulary's grammar tables are built on first use; here, on this request's thread,
  // rather than on the engine thread, where it would stall every stream once.
  if (request.options.grammar != nullptr) (void)instance->model().grammar_vocab();
  std::vector<engine::ScheduledRequest> choices(static_cast<size_t>(request.n));
  for (int32_t i = 0; i < request.n; ++i) {
    engine::ScheduledRequest& scheduled = choices[static_cast<size_t>(i)];
    scheduled.prompt = *prompt;
    scheduled.options = request.options;
    scheduled.options.sampling.seed += static_cast<uint64_t>(i);  // each choice its own sample
  }
  auto submitted = instance->scheduler().SubmitAll(std::move(choices));
  if (!submitted.ok()) return SendIn(dialect, res, submitted.status());
  std::vector<std::shared_ptr<engine::RequestHandle>> handles = std::move(*submitted);
  if (request.stream) {
    Stream(std::move(instance), request, prompt_tokens, std::move(handles), std::move(call.dialect),
           req.has_header(kTokenIdsHeader), res);
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
  meta.parse_tools = request.options.render_special;
  meta.tool_format = request.tool_format;
  meta.parallel_tool_calls = request.parallel_tool_calls;
  meta.opens_think = request.opens_think;
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
        if (i == 0) CurrentRequestLog().ttft_s = SecondsSince(CurrentRequestLog().start);
      }
      metrics_.AddGeneratedTokens(static_cast<int64_t>(part.tokens.size()));
      total.Append(std::move(part));
    }
    if (!total.status.ok()) {
      for (const auto& h : handles) h->Cancel();
      return SendIn(dialect, res, total.status);
    }
  }
  int32_t completion_tokens = 0;
  for (const engine::RequestOutput& total : totals) completion_tokens += total.completion_tokens;
  NoteTokens(totals.front(), completion_tokens);
  const ResponseMeta meta = MetaOf(instance, request, dialect);
  const tokenizer::Tokenizer& tok = instance.model().tokenizer();
  res.set_content(totals.size() == 1 ? dialect.Whole(meta, totals.front(), tok) : dialect.WholeChoices(meta, totals, tok),
                  kJson);
}

namespace {

// The events of one output of choice `choice` of a stream, and its counts noted; true in
// `*failed` when the choice failed (the events then end the whole stream).
std::string ChoiceEvents(StreamState& state, StreamChoice& choice, engine::RequestOutput&& out, Metrics& metrics,
                         bool* failed) {
  if (!state.saw_token && !out.tokens.empty()) {
    state.saw_token = true;
    metrics.ObserveTimeToFirstToken(SecondsSince(state.start));
    CurrentRequestLog().ttft_s = SecondsSince(CurrentRequestLog().start);
  }
  metrics.AddGeneratedTokens(static_cast<int64_t>(out.tokens.size()));
  Dialect& dialect = *state.dialect;
  if (out.done && !out.status.ok()) {
    *failed = true;
    return dialect.StreamError(HttpErrorOf(out.status));
  }
  const tokenizer::Tokenizer& tok = state.instance->model().tokenizer();
  std::string events;
  if (!choice.started) events += dialect.StreamStart(choice.meta, state.prompt_tokens, tok);
  choice.started = true;
  engine::RequestOutput body = out;
  body.done = false;
  events += dialect.StreamPiece(choice.meta, body, tok);
  if (!out.done) return events;
  choice.done = true;
  state.choices_done += 1;
  state.completion_tokens += out.completion_tokens;
  if (state.choices_done == state.choices.size()) NoteTokens(out, state.completion_tokens);
  return events + dialect.StreamEnd(choice.meta, out, tok);
}

}  // namespace

void HttpServer::Stream(std::shared_ptr<engine::ServingInstance> instance, const ApiRequest& request,
                        int32_t prompt_tokens, std::vector<std::shared_ptr<engine::RequestHandle>> handles,
                        std::shared_ptr<Dialect> dialect, bool token_ids, httplib::Response& res) {
  COHORT_CHECK(!handles.empty());
  auto state = std::make_shared<StreamState>();
  ResponseMeta meta = MetaOf(*instance, request, *dialect);
  meta.token_ids = token_ids;
  for (size_t i = 0; i < handles.size(); ++i) {
    StreamChoice& choice = state->choices.emplace_back();
    choice.handle = std::move(handles[i]);
    choice.meta = meta;
    choice.meta.choice = static_cast<int32_t>(i);
  }
  state->instance = std::move(instance);
  state->dialect = std::move(dialect);
  state->prompt_tokens = prompt_tokens;
  state->start = Clock::now();
  const auto wait = state->choices.size() == 1 ? kPollInterval : kChoicePollInterval;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      state->dialect->StreamType(),
      [this, state, wait](size_t, httplib::DataSink& sink) {
        // Waits on the first choice still running, then takes what the others have ready.
        std::string events;
        bool waited = false;
        bool got = false;
        bool failed = false;
        for (StreamChoice& choice : state->choices) {
          if (choice.done) continue;
          engine::RequestOutput out;
          const bool ready = choice.handle->Wait(out, waited ? std::chrono::milliseconds(0) : wait);
          waited = true;
          if (!ready) continue;
          got = true;
          events += ChoiceEvents(*state, choice, std::move(out), metrics_, &failed);
          if (failed) break;
        }
        // Nothing new: notice a client that went away even while no token is ready.
        if (!got && !sink.is_writable()) {
          state->CancelAll();
          return false;
        }
        if (!events.empty() && !sink.write(events.data(), events.size())) {
          state->CancelAll();
          return false;
        }
        if (failed) state->CancelAll();
        if (failed || state->choices_done == state->choices.size()) sink.done();
        return true;
      },
      [state](bool) { state->CancelAll(); });
}

}  // namespace cohort::server
