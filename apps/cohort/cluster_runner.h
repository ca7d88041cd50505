// InstanceRunner: the coordinator's side of one placed instance epoch. It opens the model,
// starts a parallel::Session over the other ranks' worker services (or runs the model
// alone when it has one rank), and serves it with an engine::Scheduler and the normal
// OpenAI HttpServer on an internal port, which every node's public API forwards to.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/instance.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "core/status.h"
#include "server/server_options.h"

namespace cohort::engine {
class LoadedModel;
class Scheduler;
}  // namespace cohort::engine
namespace cohort::parallel {
class Session;
}
namespace cohort::gguf {
class File;
}
namespace cohort::server {
class HttpServer;
}
namespace cohort::tokenizer {
class ChatTemplate;
}
namespace cohort::app {

struct RunnerOptions {
  std::string host;              // the internal HTTP server's address (reachable by peers)
  int threads = 1;               // this node's compute threads
  int worker_threads = 1;        // each worker's
  int parallel = 4;              // KV slots
  int ctx = 0;                   // context per slot (0: min(model's, 4096))
  std::string chat_template;     // built-in name or Jinja file overriding the model's
  server::ServerOptions http;    // limits and API keys of the internal server (host/port ignored)
  std::chrono::milliseconds comm_timeout{3000};   // bounds a collective on a dead link
  std::chrono::milliseconds setup_timeout{10000}; // bounds connecting the ranks
  int64_t link_latency_us = 0;     // TCP link emulation between ranks (tests, demos)
  int64_t link_bandwidth_Bps = 0;
};

class InstanceRunner {
 public:
  // Loads and starts serving `instance` (blocks while the ranks load).
  static Result<std::unique_ptr<InstanceRunner>> Start(const cluster::Instance& instance,
                                                       const RunnerOptions& options, Logger& log);
  ~InstanceRunner();  // stops the server, the scheduler and the session (workers free their shards)
  InstanceRunner(const InstanceRunner&) = delete;
  InstanceRunner& operator=(const InstanceRunner&) = delete;

  uint64_t epoch() const { return epoch_; }
  const std::string& api() const { return api_; }  // host:port of the internal server
  // Ok while the model runs; the forward failure that broke it otherwise.
  Status failure() const;

 private:
  InstanceRunner() = default;
  Status StartServing(const cluster::Instance& instance, const RunnerOptions& options, Logger& log);

  uint64_t epoch_ = 0;
  std::string api_;
  std::unique_ptr<gguf::File> file_;                  // ranks > 1: outlives the session
  std::unique_ptr<engine::LoadedModel> file_model_;   // one rank: the whole model
  std::unique_ptr<parallel::Session> session_;        // ranks > 1
  std::unique_ptr<engine::LoadedModel> dist_model_;   // the session's executor with the tokenizer
  std::unique_ptr<tokenizer::ChatTemplate> chat_template_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<engine::Scheduler> scheduler_;
  std::unique_ptr<server::HttpServer> server_;
  std::thread serve_thread_;
};

}  // namespace cohort::app
