// Small pieces several `cohort` subcommands share: option parsing helpers, the cluster flags
// of `node` and `serve --cluster`, and the stop signals a serving command waits for.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "cluster/cluster_node.h"
#include "core/status.h"
#include "parallel/session.h"

namespace CLI {
class App;
}

namespace cohort::app {

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated option, empty items dropped.
std::vector<std::string> SplitCommaList(const std::string& text);

// The cluster secret from --secret or the first line of --secret-file (not both).
Result<std::string> ReadSecret(const std::string& secret, const std::string& secret_file);

// The fixed ports that follow a node's control port P (--listen), so that a firewall opens
// known numbers (docs/DEPLOY.md): the worker service at P+2, the API relay between nodes at
// P+3 and the data channels between ranks at P+4..P+53 (7946: 7948, 7949 and 7950-7999).
// P = 0 (tests): any port for each.
inline constexpr int kWorkerPortOffset = 2;
inline constexpr int kRelayPortOffset = 3;
inline constexpr int kDataPortOffset = 4;
inline constexpr int kDataPortCount = 50;
// HOST:P+offset of `listen` HOST:P (HOST:0 when P is 0).
std::string ListenPlus(const std::string& listen, int offset);
inline std::string WorkerListenOf(const std::string& listen) { return ListenPlus(listen, kWorkerPortOffset); }
// --data-ports `flag` when given, else P+4..P+53 of `listen` (any when P is 0 or unknown).
Result<parallel::PortRange> DataPortsOf(const std::string& flag, const std::string& listen);

// What joining a cluster takes, from `cohort node`'s and `cohort serve --cluster`'s flags.
struct ClusterFlags {
  std::string listen;           // control address (UDP and TCP)
  std::string advertise;        // what peers use (default: listen)
  std::string peers;            // host:port,... (networks without multicast)
  std::string secret;
  std::string secret_file;
  std::string state_dir;        // keeps the node id
  std::string name;             // default: host name
  bool no_multicast = false;
  std::string multicast_group;  // "": the default group
  int heartbeat_ms = 500;
  int suspect_ms = 0;
  int dead_ms = 0;
  bool no_benchmarks = false;   // publish memory and cores only
};
// Adds the flags to `cmd`, each help text after `help_prefix` ("" or "cluster: ").
// `secret_flags` false: the command declares --secret/--secret-file itself (serve, whose one
// secret is both the cluster's and its data plane's) and copies them into `flags`.
void AddClusterFlags(CLI::App* cmd, ClusterFlags* flags, const std::string& help_prefix, bool secret_flags = true);
Result<cluster::ClusterOptions> ClusterOptionsOf(const ClusterFlags& flags);

// SIGINT and SIGTERM, blocked in this thread and every thread started after it, so that
// stopping runs as ordinary code (WaitForStop) rather than inside a signal handler. SIGPIPE
// is ignored: a client that hangs up is an error code, not the end of the process.
sigset_t BlockStopSignals();
// Returns once one of `signals` arrives, or once `running` says false (checked every 200 ms).
// SIGHUP calls `on_hangup` (reload keys) where one is given, and otherwise stops too.
void WaitForStop(const sigset_t& signals, const std::function<bool()>& running,
                 const std::function<void()>& on_hangup = nullptr);

}  // namespace cohort::app
