// `cohort serve --cluster`; see cluster_serve.h. Signals are blocked in every thread and
// taken by sigwait in the main thread, as in plain `serve`.
#include "cluster_serve.h"
#include "app_common.h"

#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "cluster/cluster_node.h"
#include "cluster_api.h"
#include "cluster_daemon.h"
#include "cmd_serve.h"
#include "comm/tcp_transport.h"
#include "parallel/session.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "cohort serve --cluster: %s\n", status.ToString().c_str());
  return 1;
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

// The worker service: `slots` threads each taking one job at a time from the same listener,
// so a job stuck on a peer cut off the network does not keep new ones out. A thread ends
// after its job once `stop` is set (shutting the listener down wakes the idle ones).
// Shares of models this node lacks are streamed from the coordinator into `cache_dir`.
std::vector<std::thread> StartWorkerService(std::shared_ptr<comm::TcpListener> listener, int slots,
                                            std::shared_ptr<std::atomic<bool>> stop,
                                            const std::string& cache_dir,
                                            std::shared_ptr<KnownFiles> known_files,
                                            std::shared_ptr<Logger> log) {
  std::vector<std::thread> threads;
  for (int i = 0; i < slots; ++i) {
    threads.emplace_back([listener, stop, cache_dir, known_files, log] {
      while (!*stop) {
        parallel::WorkerEnvironment env;
        env.cache_dir = cache_dir;
        env.known_files = known_files->Get();
        const Status st = parallel::ServeOneJob(listener->fd(), env, log.get());
        // Several threads wait on one listener; those that lose the race to accept say so.
        const bool lost_race = st.message().rfind("accept:", 0) == 0;
        if (!st.ok() && !*stop && !lost_race) log->Info("worker job ended: {}", st.ToString());
      }
    });
  }
  return threads;
}

Result<cluster::ClusterOptions> ClusterOptionsOf(const ClusterServeOptions& co) {
  cluster::ClusterOptions c;
  c.listen = co.listen;
  c.advertise = co.advertise;
  c.peers = SplitCommaList(co.peers);
  COHORT_ASSIGN_OR_RETURN(c.secret, ReadSecret(co.secret, co.secret_file));
  c.state_dir = co.state_dir;
  c.name = co.name;
  c.multicast = !co.no_multicast;
  c.heartbeat_ms = co.heartbeat_ms;
  c.timeouts.suspect_ms = static_cast<uint64_t>(co.suspect_ms);
  c.timeouts.dead_ms = static_cast<uint64_t>(co.dead_ms);
  c.profile.run_benchmarks = !co.no_benchmarks;
  return c;
}

// What instances this node coordinates run with: serve's own options.
DaemonOptions DaemonOptionsOf(const ServeOptions& options, const std::string& name, const std::string& host) {
  DaemonOptions d;
  d.name = name;
  d.context_tokens = options.ctx;
  d.sequences = options.parallel;
  d.runner.host = host;
  d.runner.threads = options.threads;
  d.runner.worker_threads = options.dist.worker_threads > 0 ? options.dist.worker_threads : options.threads;
  d.runner.parallel = options.parallel;
  d.runner.ctx = options.ctx;
  d.runner.chat_template = options.chat_template;
  d.runner.http.api_keys = options.api_keys;
  d.runner.http.max_body_bytes = options.max_body_bytes;
  d.runner.http.max_tokens_limit = options.max_tokens;
  d.runner.http.timeout_s = options.timeout_s;
  d.runner.http.http_threads = options.http_threads;
  d.runner.comm_timeout = std::chrono::milliseconds(options.cluster.comm_timeout_ms);
  d.runner.link_latency_us = options.dist.link_latency_us;
  d.runner.link_bandwidth_Bps = static_cast<int64_t>(options.dist.link_gbit * 1e9 / 8);
  return d;
}

ClusterApiOptions ApiOptionsOf(const ServeOptions& options) {
  ClusterApiOptions a;
  a.host = options.host;
  a.port = options.port;
  a.http_threads = options.http_threads;
  a.max_body_bytes = options.max_body_bytes;
  a.forward_read_timeout_s = options.cluster.forward_timeout_s;
  a.default_nodes = options.cluster.nodes;
  a.default_layout = options.dist.layout;
  a.api_keys = options.api_keys;
  return a;
}

// -m: this node's model becomes an instance (the same id from every node that names it);
// retried for a while, since the cluster may still be forming.
void ProposeStartupModel(const ServeOptions& options, cluster::ClusterNode& node, ClusterDaemon& daemon,
                         Logger& log) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    auto entry = daemon.ResolveModel(options.model);
    if (entry.ok()) {
      if (node.Snapshot().state.placements.count(entry->name) != 0) return;
      cluster::Instance instance;
      instance.id = entry->name;
      instance.model = entry->name;
      instance.layout = options.dist.layout;
      instance.nodes = options.cluster.nodes;
      if (node.ProposeChange({cluster::ChangeKind::kPutPlacement, instance.id, cluster::InstanceToJson(instance)}).ok()) {
        return;
      }
    } else {
      log.Warn("-m {}: {}", options.model, entry.status().ToString());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

int64_t ParseByteSize(const std::string& text) {
  if (text.empty()) return 0;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  double scale = 1;
  if (used + 1 == text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[used]))) {
      case 'K': scale = 1024.0; break;
      case 'M': scale = 1024.0 * 1024; break;
      case 'G': scale = 1024.0 * 1024 * 1024; break;
      default: return -1;
    }
  } else if (used != text.size()) {
    return -1;
  }
  return value < 0 ? -1 : static_cast<int64_t>(value * scale);
}

void AddClusterServeOptions(CLI::App* cmd, ClusterServeOptions* o) {
  o->model_flag = cmd->get_option("--model");
  cmd->add_flag("--cluster", o->enabled, "join a cluster: serve any instance from this node (docs/CLUSTER.md)");
  cmd->add_option("--listen", o->listen, "cluster: control address HOST:PORT (UDP and TCP)");
  cmd->add_option("--advertise", o->advertise, "cluster: address peers should use (default: --listen)");
  cmd->add_option("--peers", o->peers, "cluster: other nodes HOST:PORT,... (networks without multicast)");
  cmd->add_option("--secret", o->secret, "cluster: the cluster secret");
  cmd->add_option("--secret-file", o->secret_file, "cluster: file whose first line is the secret");
  cmd->add_option("--state-dir", o->state_dir, "cluster: keeps this node's id across restarts");
  cmd->add_option("--name", o->name, "cluster: node name (default: host name)");
  cmd->add_flag("--no-multicast", o->no_multicast, "cluster: no multicast beacons (use --peers)");
  cmd->add_option("--worker-listen", o->worker_listen, "cluster: worker service HOST:PORT (default: --listen host, any port)");
  cmd->add_option("--cache-dir", o->cache_dir, "cluster: where streamed model shares are kept (default: <state-dir>/cache)");
  cmd->add_option("--max-memory", o->max_memory, "cluster: this node's budget for shards + KV (bytes; K/M/G)");
  cmd->add_option("--nodes", o->nodes, "cluster: nodes of -m's instance (0: as the planner finds best)")->check(CLI::Range(0, 64));
  cmd->add_option("--heartbeat-ms", o->heartbeat_ms, "cluster: heartbeat interval")->check(CLI::Range(10, 60000));
  cmd->add_option("--suspect-ms", o->suspect_ms, "cluster: silence before a node is suspect (forwards to it fail)")->check(CLI::Range(10, 600000));
  cmd->add_option("--dead-ms", o->dead_ms, "cluster: silence before a node is dead")->check(CLI::Range(10, 600000));
  cmd->add_option("--comm-timeout-ms", o->comm_timeout_ms, "cluster: a collective's bound (a cut link)")->check(CLI::Range(100, 600000));
  cmd->add_option("--forward-timeout", o->forward_timeout_s, "cluster: seconds a forwarded request waits on a silent coordinator")->check(CLI::Range(1, 3600));
  cmd->add_option("--worker-slots", o->worker_slots, "cluster: worker jobs at once")->check(CLI::Range(1, 64));
  cmd->add_flag("--no-benchmarks", o->no_benchmarks, "cluster: publish memory and cores only");
}

int ClusterServeCommand(const ServeOptions& options) {
  const ClusterServeOptions& co = options.cluster;
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Shared with the worker threads, which may outlive this function (see StartWorkerService).
  auto log_owner = std::make_shared<Logger>(options.verbose ? LogLevel::kInfo : LogLevel::kWarn);
  Logger& log = *log_owner;

  const int64_t max_memory = ParseByteSize(co.max_memory);
  if (max_memory < 0) return Fail(InvalidArgument("--max-memory: '" + co.max_memory + "' is not a size"));
  const std::string public_host = HostOf(co.advertise.empty() ? co.listen : co.advertise);
  // Peers connect to this node's worker service and instance servers at this host.
  if (public_host == "0.0.0.0" || public_host.empty()) {
    return Fail(InvalidArgument("--listen " + co.listen + " is no address peers can reach: give --advertise HOST:PORT"));
  }
  auto bound = comm::TcpListener::Bind(co.worker_listen.empty() ? public_host + ":0" : co.worker_listen);
  if (!bound.ok()) return Fail(bound.status().Annotate("worker service"));
  std::shared_ptr<comm::TcpListener> workers(std::move(*bound));

  auto c = ClusterOptionsOf(co);
  if (!c.ok()) return Fail(c.status());
  // A request forwarded to a coordinator cut off the network ends once the coordinator is
  // suspect and has been quiet for a second (cluster_api.h): say when that exceeds 5 s.
  if (co.suspect_ms + ForwardOptions{}.quiet_ms > 5000) {
    log.Warn("--suspect-ms {}: requests through this node to a coordinator cut off the network fail only ~{} ms "
             "after the cut",
             co.suspect_ms, co.suspect_ms + ForwardOptions{}.quiet_ms);
  }
  auto started = cluster::ClusterNode::Start(*c, &log);
  if (!started.ok()) return Fail(started.status());
  cluster::ClusterNode& node = **started;
  const std::string name = node.Snapshot().members.front().name;

  DaemonOptions d = DaemonOptionsOf(options, name, public_host);
  d.worker = workers->address();
  d.max_memory_bytes = max_memory;
  ClusterApiOptions a = ApiOptionsOf(options);
  ClusterDaemon* daemon_ptr = nullptr;
  ClusterApi api(node, [&](const std::string& m) { return daemon_ptr->ResolveModel(m); }, a, log);
  auto port = api.Bind();
  if (!port.ok()) return Fail(port.status());
  d.api = options.host + ":" + std::to_string(*port);
  ClusterDaemon daemon(node, d, log);
  daemon_ptr = &daemon;
  auto workers_stop = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::thread> worker_threads = StartWorkerService(
      workers, co.worker_slots, workers_stop,
      !co.cache_dir.empty() ? co.cache_dir : (co.state_dir.empty() ? "" : co.state_dir + "/cache"),
      daemon.known_files(), log_owner);
  daemon.Start();
  std::thread api_thread([&] {
    const Status st = api.Serve();
    if (!st.ok()) log.Error("{}", st.ToString());
  });
  std::fprintf(stderr, "cohort serve: node %s (%s) control %s, workers %s, API http://%s\n",
               node.id().Hex().c_str(), name.c_str(), node.address().c_str(), workers->address().c_str(),
               d.api.c_str());
  std::fflush(stderr);

  std::thread startup_model;
  if (co.model_flag != nullptr && co.model_flag->count() > 0) {
    startup_model = std::thread([&] { ProposeStartupModel(options, node, daemon, log); });
  }

  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  if (startup_model.joinable()) startup_model.join();
  api.Stop();
  api_thread.join();
  daemon.Stop();
  node.Stop();
  *workers_stop = true;
  ::shutdown(workers->fd(), SHUT_RDWR);
  // A job whose coordinator is cut off would keep its thread: do not wait for those.
  for (std::thread& t : worker_threads) t.detach();
  std::fprintf(stderr, "cohort serve: node stopped\n");
  return 0;
}

}  // namespace cohort::app
