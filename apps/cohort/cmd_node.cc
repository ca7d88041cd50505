// `cohort node`: a ClusterNode plus its HTTP routes (server/node_routes.h), stopped by
// SIGINT/SIGTERM as `cohort serve` is.
#include "cmd_node.h"

#include <cstdio>
#include <mutex>
#include <vector>

#include <CLI/CLI.hpp>

#include "cluster/cluster_node.h"
#include "comm/socket_util.h"
#include "server/http_server.h"
#include "server/node_routes.h"

namespace cohort::app {
namespace {

int Fail(const Status& s) {
  std::fprintf(stderr, "cohort node: %s\n", s.ToString().c_str());
  return 1;
}

void PrintLine(const std::string& line) {
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

// Prints membership events, holding those that arrive before the "listening" line (the
// node's threads start first) until it is printed, so the output reads in order.
class EventPrinter {
 public:
  void Event(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (announced_) {
      PrintLine(line);
    } else if (held_.size() < 1024) {
      held_.push_back(line);
    }
  }
  void Announce(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    PrintLine(line);
    for (const std::string& held : held_) PrintLine(held);
    held_.clear();
    announced_ = true;
  }

 private:
  std::mutex mutex_;
  bool announced_ = false;
  std::vector<std::string> held_;
};

}  // namespace

CLI::App* AddNodeCommand(CLI::App& app, NodeOptions* o) {
  CLI::App* cmd = app.add_subcommand("node", "join the cluster (membership only) and serve GET /v1/cluster");
  AddClusterFlags(cmd, &o->cluster, "");
  cmd->add_option("--multicast-group", o->cluster.multicast_group, "beacon group GROUP:PORT");
  cmd->add_option("--http", o->http, "HOST:PORT for GET /v1/cluster (port 0: any, printed)");
  cmd->add_option("--api-key", o->api_keys,
                  "accepted Bearer key on the HTTP routes (repeatable; needed beyond loopback)");
  cmd->add_option("--api-key-file", o->api_key_file, "accepted keys, 'NAME KEY' per line (reloaded on SIGHUP)");
  return cmd;
}

int NodeCommand(const NodeOptions& o) {
  const sigset_t stop_signals = BlockStopSignals();
  auto c = ClusterOptionsOf(o.cluster);
  if (!c.ok()) return Fail(c.status());
  server::ServerOptions http_options;
  http_options.api_keys = o.api_keys;
  http_options.api_key_file = o.api_key_file;
  http_options.open_paths = {};
  http_options.max_body_bytes = 64 << 10;
  http_options.timeout_s = 5;
  http_options.http_threads = 8;
  if (!o.http.empty()) {
    auto addr = comm::SocketAddress::Parse(o.http);
    if (!addr.ok()) return Fail(addr.status().Annotate("--http"));
    http_options.host = o.http.substr(0, o.http.rfind(':'));
    // POST /v1/cluster/changes rewrites the cluster's state: never open to the network.
    if (http_options.host.rfind("127.", 0) != 0 && http_options.host != "localhost" && o.api_keys.empty() &&
        o.api_key_file.empty()) {
      return Fail(InvalidArgument("--http " + o.http + " is reachable beyond this host: give --api-key or --api-key-file"));
    }
    http_options.port = addr->port();
  }

  Logger log(o.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  EventPrinter printer;
  cluster::ClusterCallbacks callbacks;
  callbacks.on_member = [&](const cluster::MemberChange& m) {
    printer.Event("cohort node: " + m.id.Short() + " (" + m.name + ", " + m.address + ") " +
                  cluster::MemberEventName(m.event));
  };
  auto started = cluster::ClusterNode::Start(*c, &log, callbacks);
  if (!started.ok()) return Fail(started.status());
  cluster::ClusterNode& node = **started;

  server::HttpServer http(http_options, log);
  server::AddNodeRoutes(http, node);
  std::string http_line = "off";
  if (!o.http.empty()) {
    auto port = http.Bind();
    if (!port.ok()) return Fail(port.status().Annotate("--http"));
    http_line = "http://" + http_options.host + ":" + std::to_string(*port) + "/v1/cluster";
    http.Start();
  }
  printer.Announce("cohort node: " + node.id().Hex() + " listening on " + node.address() + ", " + http_line);

  WaitForStop(stop_signals, [] { return true; }, [&] {
    if (Status st = http.ReloadKeys(); !st.ok()) log.Error("SIGHUP: keys kept as they were: {}", st.ToString());
  });
  (void)http.Stop();
  node.Stop();
  PrintLine("cohort node: stopped");
  return 0;
}

}  // namespace cohort::app
