// `cohort serve`: loads a model and serves the OpenAI-compatible HTTP API with continuous
// batching until SIGINT or SIGTERM.
#pragma once

#include <string>

#include "cluster_serve.h"
#include "cmd_worker.h"
#include "engine/serving.h"
#include "server/server_options.h"

namespace cohort::app {

struct ServeOptions {
  std::string model;              // GGUF path (main fills in the demo model when empty)
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (printed at start)
  std::vector<std::string> api_keys;
  std::string api_key_file;       // "NAME KEY" per line, reloaded on SIGHUP
  double rate_limit = 0;          // requests per second per key (0: none)
  double rate_burst = 0;          // requests at once per key (0: max(1, rate_limit))
  std::string tls_cert, tls_key;  // PEM files: the API speaks only HTTPS
  int request_timeout_s = 30;     // a request's line, headers and body must arrive within this
  std::vector<std::string> cors_origins;  // --cors-origin: browser origins allowed ("*": any)
  int parallel = 4;               // sequence slots generating at once
  int ctx = 0;                    // context per slot (0: min(model's, 4096))
  int max_queue = 64;             // waiting requests before 429
  int batch = 512;                // tokens per forward pass
  std::string chat_template;      // built-in name or Jinja file overriding the model's
  std::string kv_type = "f16";
  int64_t cache_ram_bytes = -1;   // prefix cache budget (-1: engine::DefaultCacheRam(); 0: off)
  int prefill_chunk = 0;          // prompt tokens per step beside decoding streams (0: measured)
  std::string slot_save_path;     // --slot-save-path: where POST /slots/{id}?action=save writes (empty: off)
  size_t max_body_bytes = 1 << 20;
  int max_tokens = 0;             // largest max_tokens accepted (0: the context)
  int timeout_s = 10;             // socket read/write timeout
  int http_threads = 64;
  bool no_request_log = false;   // --no-request-log
  int threads = 0;                // compute threads (main fills in)
  bool verbose = false;
  DistOptions dist;               // spread the model over workers (cmd_worker.h)
  ClusterServeOptions cluster;    // --cluster: join a cluster instead (cluster_serve.h)
};

// Registers the `serve` subcommand on `app`, filling `options`; returns it so main can test
// whether it was chosen.
CLI::App* AddServeCommand(CLI::App& app, ServeOptions* options);
int ServeCommand(const ServeOptions& options);

// What a served model runs with (its name: the file's stem), and the HTTP front's limits:
// the same for `serve` and for the instances a cluster node coordinates.
engine::ServingOptions ServingOptionsOf(const ServeOptions& options);
server::ServerOptions HttpOptionsOf(const ServeOptions& options);

}  // namespace cohort::app
