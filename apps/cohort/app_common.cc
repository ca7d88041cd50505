// Small pieces several `cohort` subcommands share (see app_common.h).
#include "app_common.h"

#include <pthread.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>

namespace cohort::app {

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<std::string> ReadSecret(const std::string& secret, const std::string& secret_file) {
  if (!secret.empty() && !secret_file.empty()) return InvalidArgument("give --secret or --secret-file, not both");
  if (secret_file.empty()) return secret;
  std::ifstream in(secret_file);
  if (!in) return IoError("cannot read " + secret_file);
  std::string line;
  std::getline(in, line);  // the first line; a trailing newline is not part of it
  return line;
}

namespace {

// The port of HOST:PORT, -1 when it has none.
int PortOf(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return -1;
  try {
    return std::stoi(address.substr(colon + 1));
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::string ListenPlus(const std::string& listen, int offset) {
  const int port = PortOf(listen);
  const std::string host = listen.substr(0, listen.rfind(':'));
  return host + ":" + std::to_string(port > 0 && port + offset <= 65535 ? port + offset : 0);
}

Result<parallel::PortRange> DataPortsOf(const std::string& flag, const std::string& listen) {
  if (!flag.empty()) return parallel::PortRange::Parse(flag);
  const int port = PortOf(listen);
  parallel::PortRange r;
  if (port <= 0 || port + kDataPortOffset > 65535) return r;
  r.first = port + kDataPortOffset;
  r.last = std::min(65535, r.first + kDataPortCount - 1);
  return r;
}

void AddClusterFlags(CLI::App* cmd, ClusterFlags* o, const std::string& p, bool secret_flags) {
  cmd->add_option("--listen", o->listen, p + "control address HOST:PORT (UDP and TCP)");
  cmd->add_option("--advertise", o->advertise, p + "address peers should use (default: --listen)");
  cmd->add_option("--peers", o->peers, p + "other nodes HOST:PORT,... (networks without multicast)");
  if (secret_flags) {
    cmd->add_option("--secret", o->secret, p + "the cluster secret");
    cmd->add_option("--secret-file", o->secret_file, p + "file whose first line is the secret");
  }
  cmd->add_option("--state-dir", o->state_dir, p + "keeps this node's id across restarts");
  cmd->add_option("--name", o->name, p + "node name (default: host name)");
  cmd->add_flag("--no-multicast", o->no_multicast, p + "no multicast beacons (use --peers)");
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, p + "heartbeat interval")->check(CLI::Range(10, 60000));
  cmd->add_option("--suspect-ms", o->suspect_ms, p + "silence before a node is suspect")->check(CLI::Range(10, 600000));
  cmd->add_option("--dead-ms", o->dead_ms, p + "silence before a node is dead")->check(CLI::Range(10, 600000));
  cmd->add_flag("--no-benchmarks", o->no_benchmarks, p + "publish memory and cores only");
}

Result<cluster::ClusterOptions> ClusterOptionsOf(const ClusterFlags& f) {
  cluster::ClusterOptions c;
  c.listen = f.listen;
  c.advertise = f.advertise;
  c.peers = SplitCommaList(f.peers);
  COHORT_ASSIGN_OR_RETURN(c.secret, ReadSecret(f.secret, f.secret_file));
  c.state_dir = f.state_dir;
  c.name = f.name;
  c.multicast = !f.no_multicast;
  if (!f.multicast_group.empty()) c.multicast_group = f.multicast_group;
  c.heartbeat_ms = f.heartbeat_ms;
  c.timeouts.suspect_ms = static_cast<uint64_t>(f.suspect_ms);
  c.timeouts.dead_ms = static_cast<uint64_t>(f.dead_ms);
  c.profile.run_benchmarks = !f.no_benchmarks;
  return c;
}

sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

void WaitForStop(const sigset_t& signals, const std::function<bool()>& running,
                 const std::function<void()>& on_hangup) {
  const timespec poll{0, 200 * 1000 * 1000};
  while (running()) {
    const int sig = sigtimedwait(&signals, nullptr, &poll);
    if (sig == SIGHUP && on_hangup) {
      on_hangup();
      continue;
    }
    if (sig > 0) return;
  }
}

}  // namespace cohort::app
