// `cohort serve --cluster`: this machine joins a cluster (membership, worker service, the
// public API that forwards to instances' coordinators); run it on every machine and load
// models across them with POST /v1/instances or -m. See docs/CLUSTER.md.
#pragma once

#include <string>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace cohort::app {

struct ServeOptions;

struct ClusterServeOptions {
  bool enabled = false;
  std::string listen = "127.0.0.1:7946";  // control address (UDP and TCP)
  std::string advertise;                  // what peers use (default: --listen)
  std::string peers;                      // host:port,... (networks without multicast)
  std::string secret;
  std::string secret_file;
  std::string state_dir;                  // keeps the node id
  std::string name;                       // default: host name
  bool no_multicast = false;
  std::string worker_listen;              // worker service host:port (default: --listen's host, any port)
  std::string cache_dir;                  // streamed shares (default: <state-dir>/cache; none: local files only)
  std::string max_memory;                 // budget for shards + KV: bytes, or with K/M/G suffix
  int nodes = 0;                          // node count of -m's instance and of POSTs without one
  int heartbeat_ms = 500;
  int suspect_ms = 1500;
  int dead_ms = 3000;
  int comm_timeout_ms = 3000;             // a collective waiting on a cut link fails after this
  int forward_timeout_s = 30;             // a coordinator silent this long ends a forwarded request
  int worker_slots = 4;                   // jobs this node's worker service runs at once
  bool no_benchmarks = false;
  const CLI::Option* model_flag = nullptr;  // -m, to tell a given model from the default
};

// Adds --cluster and its options to `serve`.
void AddClusterServeOptions(CLI::App* cmd, ClusterServeOptions* options);
int ClusterServeCommand(const ServeOptions& options);

// "123", "512K", "64M", "2G" (powers of 1024) as bytes; -1 when malformed.
int64_t ParseByteSize(const std::string& text);

}  // namespace cohort::app
