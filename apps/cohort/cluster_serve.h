// `cohort serve --cluster`: this machine joins a cluster (membership, worker service, and the
// HTTP front that serves the instances it coordinates and relays the others' requests); run
// it on every machine and load models across them with POST /v1/instances or -m. See
// docs/CLUSTER.md.
#pragma once

#include <string>

#include "app_common.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace cohort::app {

struct ServeOptions;

inline ClusterFlags ServeClusterDefaults() {
  ClusterFlags f;
  f.listen = "127.0.0.1:7946";
  f.suspect_ms = 1500;
  f.dead_ms = 3000;
  return f;
}

struct ClusterServeOptions {
  bool enabled = false;
  ClusterFlags flags = ServeClusterDefaults();
  std::string worker_listen;              // worker service host:port (default: --listen's port + 2)
  std::string relay_listen;               // where other nodes relay API requests (default: --listen's port + 3)
  std::string cache_dir;                  // streamed shares (default: <state-dir>/cache; none: local files only)
  std::string models_dir;                 // registered at start, offered to the API by name, `cohort rm` deletes
                                          // here (default: <state-dir>/models)
  std::string max_memory;                 // budget for shards + KV: bytes, or with K/M/G suffix
  int nodes = 0;                          // node count of -m's instance and of POSTs without one
  int comm_timeout_ms = 3000;             // a collective waiting on a cut link fails after this
  int forward_timeout_s = 30;             // a coordinator silent this long ends a relayed request
  int worker_slots = 4;                   // jobs this node's worker service runs at once
  int worker_slots_per_coordinator = 0;   // of them, one node's at most (0: slots - 1, at least 1)
  std::string cache_max = "32G";          // bound on the streamed shares kept (LRU); "0": none
  const CLI::Option* model_flag = nullptr;  // -m, to tell a given model from the default
};

// Adds --cluster and its options to `serve`.
void AddClusterServeOptions(CLI::App* cmd, ClusterServeOptions* options);
int ClusterServeCommand(const ServeOptions& options);

}  // namespace cohort::app
