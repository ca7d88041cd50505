// `cohort node`: a ClusterNode plus a small HTTP endpoint (GET /v1/cluster, POST
// /v1/cluster/changes), stopped by SIGINT/SIGTERM taken with sigwait as in `cohort serve`.
#include "cmd_node.h"
#include "app_common.h"

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "cluster/cluster_node.h"
#include "comm/socket_util.h"

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

}  // namespace

CLI::App* AddNodeCommand(CLI::App& app, NodeOptions* o) {
  CLI::App* cmd = app.add_subcommand("node", "join the cluster (membership only) and serve GET /v1/cluster");
  cmd->add_option("--listen", o->listen, "control address HOST:PORT (UDP and TCP)");
  cmd->add_option("--advertise", o->advertise, "address peers should use (default: --listen)");
  cmd->add_option("--peers", o->peers, "other nodes HOST:PORT,... (for networks without multicast)");
  cmd->add_option("--secret", o->secret, "cluster secret");
  cmd->add_option("--secret-file", o->secret_file, "file whose first line is the cluster secret");
  cmd->add_option("--state-dir", o->state_dir, "keeps this node's id across restarts");
  cmd->add_option("--name", o->name, "node name (default: host name)");
  cmd->add_option("--http", o->http, "HOST:PORT for GET /v1/cluster (port 0: any, printed)");
  cmd->add_flag("--no-multicast", o->no_multicast, "no multicast beacons (use --peers)");
  cmd->add_option("--multicast-group", o->multicast_group, "beacon group GROUP:PORT");
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "heartbeat interval")->check(CLI::Range(10, 60000));
  cmd->add_option("--suspect-ms", o->suspect_ms, "silence before a node is suspect")->check(CLI::Range(10, 600000));
  cmd->add_option("--dead-ms", o->dead_ms, "silence before a node is dead")->check(CLI::Range(10, 600000));
  cmd->add_flag("--no-benchmarks", o->no_benchmarks, "publish memory and cores only");
  return cmd;
}

int NodeCommand(const NodeOptions& o) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  cluster::ClusterOptions c;
  c.listen = o.listen;
  c.advertise = o.advertise;
  c.peers = SplitCommaList(o.peers);
  auto secret = ReadSecret(o.secret, o.secret_file);
  if (!secret.ok()) return Fail(secret.status());
  c.secret = *secret;
  c.state_dir = o.state_dir;
  c.name = o.name;
  c.multicast = !o.no_multicast;
  c.multicast_group = o.multicast_group;
  c.heartbeat_ms = o.heartbeat_ms;
  c.timeouts.suspect_ms = static_cast<uint64_t>(o.suspect_ms);
  c.timeouts.dead_ms = static_cast<uint64_t>(o.dead_ms);
  c.profile.run_benchmarks = !o.no_benchmarks;

  Logger log(o.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  // Events can arrive before the "listening" line is printed (the node's threads start
  // first); hold them until it is, so the output reads in order.
  std::mutex print_mutex;
  bool announced = false;
  std::vector<std::string> held;
  cluster::ClusterCallbacks callbacks;
  callbacks.on_member = [&](const cluster::MemberChange& m) {
    const std::string line = "cohort node: " + m.id.Short() + " (" + m.name + ", " + m.address + ") " +
                             cluster::MemberEventName(m.event);
    std::lock_guard<std::mutex> lock(print_mutex);
    if (announced) {
      PrintLine(line);
    } else if (held.size() < 1024) {
      held.push_back(line);
    }
  };
  auto started = cluster::ClusterNode::Start(c, &log, callbacks);
  if (!started.ok()) return Fail(started.status());
  cluster::ClusterNode& node = **started;

  httplib::Server http;
  http.Get("/v1/cluster", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(cluster::SnapshotToJson(node.Snapshot()).dump(2), "application/json");
  });
  http.Post("/v1/cluster/changes", [&](const httplib::Request& req, httplib::Response& res) {
    nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    auto change = cluster::ChangeFromJson(body);
    Result<uint64_t> version = change.ok() ? node.ProposeChange(*change) : Result<uint64_t>(change.status());
    if (!version.ok()) {
      res.status = version.status().code() == StatusCode::kUnavailable ? 503 : 400;
      res.set_content(nlohmann::json{{"error", version.status().ToString()}}.dump(), "application/json");
      return;
    }
    res.set_content(nlohmann::json{{"version", *version}}.dump(), "application/json");
  });
  http.set_payload_max_length(64 << 10);
  http.set_read_timeout(5, 0);
  std::thread http_thread;
  std::string http_line = "off";
  if (!o.http.empty()) {
    auto addr = comm::SocketAddress::Parse(o.http);
    if (!addr.ok()) return Fail(addr.status().Annotate("--http"));
    const std::string host = o.http.substr(0, o.http.rfind(':'));
    const int port = addr->port() == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, addr->port()) ? addr->port() : -1);
    if (port < 0) return Fail(IoError("cannot listen on " + o.http));
    http_line = "http://" + host + ":" + std::to_string(port) + "/v1/cluster";
    http_thread = std::thread([&] { http.listen_after_bind(); });
  }
  {
    std::lock_guard<std::mutex> lock(print_mutex);
    PrintLine("cohort node: " + node.id().Hex() + " listening on " + node.address() + ", " + http_line);
    for (const std::string& line : held) PrintLine(line);
    held.clear();
    announced = true;
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  http.stop();
  if (http_thread.joinable()) http_thread.join();
  node.Stop();
  PrintLine("cohort node: stopped");
  return 0;
}

}  // namespace cohort::app
