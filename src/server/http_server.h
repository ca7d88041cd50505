// HttpServer: the one HTTP front of a process, over cpp-httplib. It bounds every request
// (body size, socket timeouts, a deadline per request, connections, a listen backlog sized for
// bursts: http_front.h), speaks TLS when given a certificate, checks API keys once for every
// route (ApiKeys: named keys, per-key rate limits; requests are logged by key name),
// maps errors to OpenAI's error JSON, and counts responses for /metrics. The OpenAI routes —
// /v1/chat/completions and /v1/completions (plain and SSE-streamed), /metrics, and for one
// model /v1/models and /health — serve the instances an InstanceRouter finds: a local
// instance's scheduler directly, a remote one by relaying the request to the node serving it
// (proxy.h). A generation whose client went away is cancelled, streaming or not. The cluster's
// routes (cluster_routes.h) and `cohort node`'s (node_routes.h) register on the same server.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/status.h"
#include "engine/serving.h"
#include "server/api_request.h"
#include "server/dialect.h"
#include "server/metrics.h"
#include "server/router.h"
#include "server/server_options.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace cohort::server {

struct ApiError;
class ApiKeys;
class HardenedServer;
class RelayListener;


// Writes `error` as OpenAI's error JSON with its status.
void SendError(httplib::Response& res, const ApiError& error);
void SendStatus(httplib::Response& res, const Status& status);  // SendError(HttpErrorOf(status))

class HttpServer {
 public:
  // `log` is borrowed and outlives the server.
  HttpServer(const ServerOptions& options, Logger& log);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // The OpenAI generation routes and /metrics over the instances `router` finds (borrowed:
  // it outlives the server). `single_model` adds /v1/models and /health for the one model
  // of `cohort serve`; a cluster node answers those with its own routes.
  void ServeInstances(InstanceRouter& router, bool single_model);
  // The route table, for the route sets of this layer (cluster_routes.h, node_routes.h).
  httplib::Server& routes() { return *http_; }
  // `path` (exact) is answered without an API key, like ServerOptions::open_paths; before
  // Start() only.
  void AddOpenPath(const std::string& path) { options_.open_paths.push_back(path); }
  // For the routes of the other client APIs (anthropic_routes.h, ollama_routes.h,
  // responses_routes.h), all on the one generation path: routes `call` to its instance and
  // runs it there, or relays `req` whole to the node serving it, which translates it itself.
  // Errors are written in call.dialect's shape. On a cluster, an answer that is a 503 before
  // anything was sent (the node serving the instance was lost, or its model failed) is tried
  // again, whole, on the instance's next placement (RetryOnNextPlacement).
  void ServeDialect(const httplib::Request& req, httplib::Response& res, DialectCall call);
  // The instance `model` names when it is served in this process; otherwise relays `req` to
  // the node serving it (or writes why it cannot be routed, in `dialect`'s shape) and
  // returns null.
  std::shared_ptr<engine::ServingInstance> LocalOrRelay(const std::string& model, const httplib::Request& req,
                                                        httplib::Response& res, const Dialect& dialect);
  // Set by ServeInstances.
  InstanceRouter& router() { return *router_; }

  // Binds options.host:options.port (port 0: a free port) and returns the port; fails first
  // on a key file or TLS files that did not load. With options.relay_listen, binds the relay
  // listener too (relay_port()).
  Result<int> Bind();
  int relay_port() const;  // 0 without a relay listener
  // Reads --api-key-file again (SIGHUP); on an error the keys stay as they were.
  Status ReloadKeys();
  bool tls() const;
  // Serves until Stop() (from any thread).
  Status Serve();
  // Serves on a thread of its own; Stop() ends and joins it.
  void Start();
  // Ends serving; with Start(), waits for its thread and returns how serving ended.
  Status Stop();
  // True from Start() until its serving ended (Stop(), or an error).
  bool serving() const { return serve_thread_.joinable() && !serving_done_; }

  const Metrics& metrics() const { return metrics_; }

 private:
  void HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  // ServeDialect's one attempt.
  void ServeOnce(const httplib::Request& req, httplib::Response& res, DialectCall call);
  // Waits until the instance `model` names is ready in a placement after `epoch`, up to
  // `deadline`; false when none came or none can (the instance is gone or unplaced).
  bool WaitForPlacementAfter(const std::string& model, uint64_t epoch, std::chrono::steady_clock::time_point deadline);
  void HandleMetrics(const httplib::Request& req, httplib::Response& res);
  // Relays `req` to `target.upstream`, or answers 503 when `req` was relayed to this node
  // already, so two nodes with different views of the state never relay in a circle.
  void Relay(const RouteTarget& target, const httplib::Request& req, httplib::Response& res);
  // A chat with tools: the family's format, special tokens rendered for the parser, and for
  // tool_choice required or named the grammar that forces the call.
  Status PrepareTools(engine::ServingInstance& instance, ApiRequest& request) const;
  // The prompt's tokens; `opens_think` (when given) says whether the rendered chat ends in an open <think>.
  Result<std::vector<int32_t>> PromptTokens(engine::ServingInstance& instance, const ApiRequest& request,
                                            bool* opens_think = nullptr) const;
  // Streams the answer as SSE (or the dialect's stream type): with several handles (n
  // choices) their chunks interleave as they come; a client that goes away cancels them all.
  void Stream(std::shared_ptr<engine::ServingInstance> instance, const ApiRequest& request, int32_t prompt_tokens,
              std::vector<std::shared_ptr<engine::RequestHandle>> handles, std::shared_ptr<Dialect> dialect,
              bool token_ids, httplib::Response& res);
  // Collects a plain response; cancels the generation when the client hangs up meanwhile.
  // With several handles (n choices), each is collected in turn while all generate.
  void Wait(engine::ServingInstance& instance, const ApiRequest& request, const httplib::Request& req,
            const std::vector<std::shared_ptr<engine::RequestHandle>>& handles, Dialect& dialect,
            httplib::Response& res);
  ResponseMeta MetaOf(engine::ServingInstance& instance, const ApiRequest& request, const Dialect& dialect);
  ParseLimits Limits(engine::ServingInstance& instance);

  ServerOptions options_;
  Logger& log_;
  InstanceRouter* router_ = nullptr;
  Metrics metrics_;
  // Answers 401 (no or a wrong key) or 429 (the key's rate spent) into `res`; false then.
  bool Admit(const httplib::Request& req, httplib::Response& res);

  Status init_;                      // what the constructor could not load (keys, TLS)
  std::unique_ptr<ApiKeys> keys_;
  std::unique_ptr<HardenedServer> http_;
  std::unique_ptr<RelayListener> relay_;  // other nodes' relays (options.relay_listen)
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> seed_state_;
  std::thread serve_thread_;  // Start()
  std::atomic<bool> serving_done_{false};
  Status served_;             // how the Start() thread's Serve() ended
};

}  // namespace cohort::server
