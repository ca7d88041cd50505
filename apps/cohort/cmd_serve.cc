// `cohort serve`: a serving instance (model, threads, scheduler) behind the HTTP front, stopped
// by SIGINT/SIGTERM (app_common.h).
#include "cmd_serve.h"
#include "app_common.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "core/log.h"
#include "engine/loaded_model.h"
#include "server/http_server.h"
#include "server/router.h"
#include "server/slot_routes.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "%s cohort serve: %s\n", LogTimestamp().c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeOptions* o) {
  CLI::App* cmd = app.add_subcommand("serve", "serve the OpenAI-compatible HTTP API (continuous batching)");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the built-in demo model)");
  cmd->add_option("--host", o->host, "address to listen on");
  cmd->add_option("--port", o->port, "port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_keys, "accepted Bearer key (repeatable; none: no authentication)");
  cmd->add_option("--api-key-file", o->api_key_file, "accepted keys, 'NAME KEY' per line (reloaded on SIGHUP)");
  cmd->add_option("--rate-limit", o->rate_limit, "requests per second per API key (0: none)")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--rate-burst", o->rate_burst, "requests at once per API key (default: the rate)")->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--tls-cert", o->tls_cert, "PEM certificate chain: serve the API over HTTPS only");
  cmd->add_option("--tls-key", o->tls_key, "PEM private key of --tls-cert");
  cmd->add_option("--request-timeout", o->request_timeout_s, "seconds a request's headers and body may take to arrive")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--cors-origin", o->cors_origins, "browser origin allowed to call the API (repeatable; *: any)");
  cmd->add_option("--parallel", o->parallel, "requests generating at once (KV cache slots)")->check(CLI::Range(1, 1024));
  cmd->add_option("-c,--ctx", o->ctx, "context per slot in tokens (default: the model's, at most 4096)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-queue", o->max_queue, "requests waiting for a slot before 429")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--batch", o->batch, "tokens per forward pass")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--chat-template", o->chat_template, "template name (llama3, chatml, deepseek3, mistral) or Jinja file");
  cmd->add_option("--kv-type", o->kv_type, "KV cache type (q8_0: llama.cpp's -ctk q8_0 -ctv q8_0)")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("--cache-ram", o->cache_ram_bytes,
                  "prefix cache budget in bytes (-1: a quarter of available memory, at most 8 GiB; 0: off)")
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 50));
  cmd->add_option("--prefill-chunk", o->prefill_chunk,
                  "prompt tokens per step beside decoding streams (0: sized from measured step times)")
      ->check(CLI::Range(0, 1 << 16));
  cmd->add_option("--slot-save-path", o->slot_save_path,
                  "directory for POST /slots/{id}?action=save|restore files (created if missing; default: off)");
  cmd->add_option("--max-body", o->max_body_bytes, "largest request body in bytes")->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-tokens", o->max_tokens, "largest max_tokens accepted (0: the context)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--timeout", o->timeout_s, "socket read/write timeout in seconds")->check(CLI::Range(1, 3600));
  cmd->add_option("--http-threads", o->http_threads, "connections served at once")->check(CLI::Range(2, 4096));
  cmd->add_flag("--no-request-log", o->no_request_log, "no log line per request on stderr");
  AddDistOptions(cmd, &o->dist);
  AddClusterServeOptions(cmd, &o->cluster);
  return cmd;
}

engine::ServingOptions ServingOptionsOf(const ServeOptions& options) {
  engine::ServingOptions s;
  s.name = std::filesystem::path(options.model).stem().string();
  s.threads = options.threads;
  s.scheduler.n_parallel = options.parallel;
  s.scheduler.n_ctx = options.ctx;  // 0: the model's, at most engine::kDefaultMaxContext
  s.scheduler.max_queue = options.max_queue;
  s.scheduler.n_batch = options.batch;
  s.scheduler.kv_type = options.kv_type == "f32" ? DType::kF32 : options.kv_type == "q8_0" ? DType::kQ8_0 : DType::kF16;
  s.scheduler.cache_ram_bytes = options.cache_ram_bytes;
  s.scheduler.prefill_chunk = options.prefill_chunk;
  s.chat_template = options.chat_template;
  return s;
}

server::ServerOptions HttpOptionsOf(const ServeOptions& options) {
  server::ServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.api_keys = options.api_keys;
  http.cors_origins = options.cors_origins;
  http.max_body_bytes = options.max_body_bytes;
  http.max_tokens_limit = options.max_tokens;
  http.timeout_s = options.timeout_s;
  http.http_threads = options.http_threads;
  http.api_key_file = options.api_key_file;
  http.rate_limit.per_second = options.rate_limit;
  http.rate_limit.burst = options.rate_burst;
  http.front.tls_cert = options.tls_cert;
  http.front.tls_key = options.tls_key;
  http.front.request_deadline_s = options.request_timeout_s;
  http.request_log = !options.no_request_log;
  return http;
}

int ServeCommand(const ServeOptions& options) {
  if (options.cluster.enabled) return ClusterServeCommand(options);
  const sigset_t stop_signals = BlockStopSignals();  // before any thread starts
  // --workers / --local-ranks: the same tokenizer over a model spread across workers; the
  // scheduler and the API do not know the difference.
  LocalWorkers spawned;  // declared first: reaped after the model that uses them
  auto loaded = OpenModel(options.model, options.dist, options.threads, &spawned);
  if (!loaded.ok()) return Fail(loaded.status());
  Logger log(options.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  auto instance = engine::ServingInstance::Open(std::move(*loaded), ServingOptionsOf(options), log);
  if (!instance.ok()) return Fail(instance.status());
  const engine::SchedulerOptions sched = (*instance)->scheduler_options();
  const std::string name = (*instance)->name();
  server::SingleInstanceRouter router(std::move(*instance));

  if (!options.slot_save_path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(options.slot_save_path, ec);
    if (ec || !std::filesystem::is_directory(options.slot_save_path)) {
      return Fail(InvalidArgument("--slot-save-path " + options.slot_save_path + " is not a directory we can create"));
    }
  }

  server::HttpServer server(HttpOptionsOf(options), log);
  server.ServeInstances(router, /*single_model=*/true);
  server::AddSlotRoutes(server, router.instance(), options.slot_save_path);
  auto port = server.Bind();
  if (!port.ok()) return Fail(port.status());
  std::fprintf(stderr, "%s cohort serve: %s (%d slots x %d tokens) listening on %s://%s:%d\n", LogTimestamp().c_str(),
               name.c_str(), sched.n_parallel, sched.n_ctx, server.tls() ? "https" : "http", options.host.c_str(), *port);
  std::fflush(stderr);

  server.Start();
  WaitForStop(stop_signals, [&] { return server.serving(); }, [&] {
    if (Status st = server.ReloadKeys(); !st.ok()) log.Error("SIGHUP: keys kept as they were: {}", st.ToString());
  });
  const Status served = server.Stop();
  if (!served.ok()) return Fail(served);
  std::fprintf(stderr, "%s cohort serve: stopped\n", LogTimestamp().c_str());
  return 0;
}

}  // namespace cohort::app
