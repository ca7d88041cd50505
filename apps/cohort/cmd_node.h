// `cohort node`: runs cluster membership only (discovery, heartbeats, leader, agreed state,
// profiles), prints membership changes and serves `GET /v1/cluster` as JSON. The control
// plane on its own, for trying a network and for the cluster tests.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace cohort::app {

struct NodeOptions {
  std::string listen = "0.0.0.0:7946";
  std::string advertise;
  std::string peers;            // "host:port,host:port"
  std::string secret;
  std::string secret_file;
  std::string state_dir;
  std::string name;
  std::string http = "127.0.0.1:7980";  // GET /v1/cluster; "": none, port 0: any free port
  bool no_multicast = false;
  std::string multicast_group = "239.255.77.76:7947";
  int heartbeat_ms = 500;
  int suspect_ms = 2000;
  int dead_ms = 5000;
  bool no_benchmarks = false;   // publish memory and cores only
  bool verbose = false;         // main fills in
};

CLI::App* AddNodeCommand(CLI::App& app, NodeOptions* options);
int NodeCommand(const NodeOptions& options);

}  // namespace cohort::app
