// HttpServer: the OpenAI-compatible HTTP API over cpp-httplib — /v1/chat/completions and
// /v1/completions (plain and SSE-streamed), /v1/models, /health, /metrics — in front of an
// engine::Scheduler. Validates and bounds every request, checks API keys, and cancels a
// generation whose client went away (streaming or not).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "server/api_request.h"
#include "server/metrics.h"
#include "server/server_options.h"
#include "tokenizer/chat_template.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace cohort::server {

struct ApiError;

class HttpServer {
 public:
  // All borrowed and must outlive the server. `chat_template` overrides the model's (may be
  // null); the scheduler must be started.
  HttpServer(engine::LoadedModel& model, engine::Scheduler& scheduler,
             const tokenizer::ChatTemplate* chat_template, const ServerOptions& options, Logger& log);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds options.host:options.port (port 0: a free port) and returns the port.
  Result<int> Bind();
  // Serves until Stop() (from any thread).
  Status Serve();
  void Stop();

  const Metrics& metrics() const { return metrics_; }

 private:
  void AddRoutes();
  bool Authorized(const httplib::Request& req, httplib::Response& res);
  void HandleGenerate(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  Result<std::vector<int32_t>> PromptTokens(const ApiRequest& request) const;
  void Stream(const ApiRequest& request, std::shared_ptr<engine::RequestHandle> handle,
              httplib::Response& res);
  // Collects a plain response; cancels the generation when the client hangs up meanwhile.
  void Wait(const ApiRequest& request, const httplib::Request& req, engine::RequestHandle& handle,
            httplib::Response& res);
  ParseLimits Limits();

  engine::LoadedModel& model_;
  engine::Scheduler& scheduler_;
  const tokenizer::ChatTemplate* chat_template_;
  ServerOptions options_;
  Logger& log_;
  Metrics metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<uint64_t> seed_state_;
};

}  // namespace cohort::server
