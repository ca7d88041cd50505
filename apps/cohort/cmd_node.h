// `cohort node`: runs cluster membership only (discovery, heartbeats, leader, agreed state,
// profiles), prints membership changes and serves GET /v1/cluster and POST
// /v1/cluster/changes. The control plane on its own, for trying a network and for the
// cluster tests.
#pragma once

#include <string>
#include <vector>

#include "app_common.h"

namespace CLI {
class App;
}

namespace cohort::app {

inline ClusterFlags NodeClusterDefaults() {
  ClusterFlags f;
  f.listen = "0.0.0.0:7946";
  f.multicast_group = "239.255.77.76:7947";
  f.suspect_ms = 2000;
  f.dead_ms = 5000;
  return f;
}

struct NodeOptions {
  ClusterFlags cluster = NodeClusterDefaults();
  std::string http = "127.0.0.1:7980";  // its HTTP routes; "": none, port 0: any free port
  std::vector<std::string> api_keys;    // accepted Bearer keys on the HTTP routes (none: open)
  std::string api_key_file;             // "NAME KEY" per line, reloaded on SIGHUP
  bool verbose = false;                 // main fills in
};

CLI::App* AddNodeCommand(CLI::App& app, NodeOptions* options);
int NodeCommand(const NodeOptions& options);

}  // namespace cohort::app
