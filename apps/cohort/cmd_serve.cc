// `cohort serve`: model + scheduler + HTTP server, stopped by SIGINT/SIGTERM. The signals are
// blocked in every thread and taken by one waiter thread with sigwait, so stopping runs as
// ordinary code rather than inside a signal handler.
#include "cmd_serve.h"
#include "app_common.h"

#include <CLI/CLI.hpp>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/context.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "server/http_server.h"
#include "tokenizer/chat_template.h"

namespace cohort::app {
namespace {

constexpr int kDefaultMaxCtx = 4096;

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort serve: %s\n", status.ToString().c_str());
  return 1;
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeOptions* o) {
  CLI::App* cmd = app.add_subcommand("serve", "serve the OpenAI-compatible HTTP API (continuous batching)");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: the built-in demo model)");
  cmd->add_option("--host", o->host, "address to listen on");
  cmd->add_option("--port", o->port, "port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", o->api_keys, "accepted Bearer key (repeatable; none: no authentication)");
  cmd->add_option("--parallel", o->parallel, "requests generating at once (KV cache slots)")->check(CLI::Range(1, 1024));
  cmd->add_option("-c,--ctx", o->ctx, "context per slot in tokens (default: the model's, at most 4096)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--max-queue", o->max_queue, "requests waiting for a slot before 429")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--batch", o->batch, "tokens per forward pass")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--chat-template", o->chat_template, "template name (llama3, chatml, deepseek3, mistral) or Jinja file");
  cmd->add_option("--kv-type", o->kv_type, "KV cache type")->check(CLI::IsMember({"f32", "f16"}));
  cmd->add_option("--max-body", o->max_body_bytes, "largest request body in bytes")->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-tokens", o->max_tokens, "largest max_tokens accepted (0: the context)")->check(CLI::Range(0, 1 << 24));
  cmd->add_option("--timeout", o->timeout_s, "socket read/write timeout in seconds")->check(CLI::Range(1, 3600));
  cmd->add_option("--http-threads", o->http_threads, "connections served at once")->check(CLI::Range(2, 4096));
  AddDistOptions(cmd, &o->dist);
  AddClusterServeOptions(cmd, &o->cluster);
  return cmd;
}

int ServeCommand(const ServeOptions& options) {
  if (options.cluster.enabled) return ClusterServeCommand(options);
  // Block the stop signals before any thread starts, so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up is an error code, not a process exit

  engine::LoadOptions load;
  load.pack_weights = !options.dist.enabled();  // a distributed model loads its own shares
  auto loaded = engine::LoadedModel::Open(options.model, load);
  if (!loaded.ok()) return Fail(loaded.status());
  // --workers / --local-ranks: the same tokenizer over a model spread across workers; the
  // scheduler and the API do not know the difference.
  std::unique_ptr<DistributedModel> dist;
  std::unique_ptr<engine::LoadedModel> dist_loaded;
  if (options.dist.enabled()) {
    auto started = DistributedModel::Start(options.dist, options.model, *(*loaded)->file(), options.threads);
    if (!started.ok()) return Fail(started.status());
    dist = std::move(*started);
    auto bundle = dist->AsLoadedModel(*(*loaded)->file());
    if (!bundle.ok()) return Fail(bundle.status());
    dist_loaded = std::move(*bundle);
  }
  engine::LoadedModel& model = dist_loaded != nullptr ? *dist_loaded : **loaded;
  std::unique_ptr<tokenizer::ChatTemplate> chat_template;
  if (!options.chat_template.empty()) {
    auto parsed = LoadChatTemplate(options.chat_template);
    if (!parsed.ok()) return Fail(parsed.status());
    chat_template = std::make_unique<tokenizer::ChatTemplate>(std::move(*parsed));
  }
  // The distributed bundle carries no chat template: use the file's.
  const tokenizer::ChatTemplate* template_used =
      chat_template != nullptr ? chat_template.get() : (*loaded)->chat_template();

  ThreadPool pool(options.threads);
  Logger log(options.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  engine::SchedulerOptions sched;
  sched.n_parallel = options.parallel;
  const int train_ctx = model.config().n_ctx_train;
  sched.n_ctx = options.ctx > 0 ? options.ctx : std::min(train_ctx > 0 ? train_ctx : kDefaultMaxCtx, kDefaultMaxCtx);
  sched.max_queue = options.max_queue;
  sched.n_batch = options.batch;
  sched.kv_type = options.kv_type == "f32" ? DType::kF32 : DType::kF16;
  engine::Scheduler scheduler(model, Context{&pool, &log}, sched);
  if (Status s = scheduler.Start(); !s.ok()) return Fail(s);

  server::ServerOptions http;
  http.host = options.host;
  http.port = options.port;
  http.api_keys = options.api_keys;
  http.model_name = std::filesystem::path(options.model).stem().string();
  http.max_body_bytes = options.max_body_bytes;
  http.max_tokens_limit = options.max_tokens;
  http.timeout_s = options.timeout_s;
  http.http_threads = options.http_threads;
  server::HttpServer server(model, scheduler, template_used, http, log);
  auto port = server.Bind();
  if (!port.ok()) return Fail(port.status());
  std::fprintf(stderr, "cohort serve: %s (%d slots x %d tokens) listening on http://%s:%d\n",
               http.model_name.c_str(), sched.n_parallel, sched.n_ctx, options.host.c_str(), *port);
  std::fflush(stderr);

  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    server.Stop();
  });
  Status served = server.Serve();
  // Serve also ends on its own (an error); wake the waiter in that case.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  scheduler.Stop();
  if (!served.ok()) return Fail(served);
  std::fprintf(stderr, "cohort serve: stopped\n");
  return 0;
}

}  // namespace cohort::app
