// `cohort serve --cluster`; see cluster_serve.h. The command wires the libraries together —
// membership (cluster::ClusterNode), the worker service, the model registry, the reconcile
// loop and the one HTTP front with the cluster's routes — and waits for SIGINT/SIGTERM.
#include "cluster_serve.h"

#include <cstdio>
#include <optional>
#include <set>

#include <CLI/CLI.hpp>

#include "cluster/cluster_node.h"
#include "core/byte_size.h"
#include "core/log.h"
#include "cluster/model_registry.h"
#include "cluster/reconciler.h"
#include "cluster/worker_service.h"
#include "comm/secure_channel.h"
#include "cmd_serve.h"
#include "server/cluster_routes.h"
#include "server/http_server.h"
#include "server/proxy.h"

namespace cohort::app {
namespace {

int Fail(const Status& status) {
  std::fprintf(stderr, "%s cohort serve --cluster: %s\n", LogTimestamp().c_str(), status.ToString().c_str());
  return 1;
}

std::string HostOf(const std::string& address) { return address.substr(0, address.rfind(':')); }

// What instances this node coordinates run with: serve's own options.
cluster::ReconcilerOptions ReconcilerOptionsOf(const ServeOptions& options, const std::string& name) {
  cluster::ReconcilerOptions r;
  r.name = name;
  r.placer.context_tokens = options.ctx;
  r.placer.sequences = options.parallel;
  if (options.cluster.flags.suspect_ms > 0) r.placer.failure_settle_ms = options.cluster.flags.suspect_ms;
  cluster::InstanceHostOptions& h = r.host;
  h.serving = ServingOptionsOf(options);
  h.worker_threads = options.dist.worker_threads > 0 ? options.dist.worker_threads : options.threads;
  h.comm_timeout = std::chrono::milliseconds(options.cluster.comm_timeout_ms);
  h.link.latency_us = options.dist.link_latency_us;
  h.link.bandwidth_bytes_per_s = static_cast<int64_t>(options.dist.link_gbit * 1e9 / 8);
  return r;
}

}  // namespace

void AddClusterServeOptions(CLI::App* cmd, ClusterServeOptions* o) {
  o->model_flag = cmd->get_option("--model");
  cmd->add_flag("--cluster", o->enabled, "join a cluster: serve any instance from this node (docs/CLUSTER.md)");
  AddClusterFlags(cmd, &o->flags, "cluster: ", /*secret_flags=*/false);  // serve's --secret (AddDistOptions)
  cmd->add_option("--worker-listen", o->worker_listen,
                  "cluster: worker service HOST:PORT (default: --listen's host and port + 2, e.g. 7948)");
  cmd->add_option("--relay-listen", o->relay_listen,
                  "cluster: HOST:PORT other nodes relay API requests to, over TLS keyed by the secret "
                  "(default: --listen's host and port + 3, e.g. 7949)");
  cmd->add_option("--cache-dir", o->cache_dir, "cluster: where streamed model shares are kept (default: <state-dir>/cache)");
  cmd->add_option("--models-dir", o->models_dir,
                  "cluster: the GGUF files offered to the cluster (registered at start; the API loads them by name; "
                  "`cohort rm` deletes there; default: <state-dir>/models)");
  cmd->add_option("--max-memory", o->max_memory, "cluster: this node's budget for shards + KV (bytes; K/M/G)");
  cmd->add_option("--nodes", o->nodes, "cluster: nodes of -m's instance (0: as the planner finds best)")->check(CLI::Range(0, 64));
  cmd->add_option("--comm-timeout-ms", o->comm_timeout_ms, "cluster: a collective's bound (a cut link)")->check(CLI::Range(100, 600000));
  cmd->add_option("--forward-timeout", o->forward_timeout_s, "cluster: seconds a relayed request waits on a silent coordinator")->check(CLI::Range(1, 3600));
  cmd->add_option("--worker-slots", o->worker_slots, "cluster: worker jobs at once")->check(CLI::Range(1, 64));
  cmd->add_option("--worker-slots-per-coordinator", o->worker_slots_per_coordinator,
                  "cluster: worker jobs one coordinator node may hold (0: slots - 1)")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--cache-max", o->cache_max, "cluster: bound on the streamed shares kept (bytes; K/M/G; LRU evicted)");
}

int ClusterServeCommand(const ServeOptions& options) {
  const ClusterServeOptions& co = options.cluster;
  const sigset_t stop_signals = BlockStopSignals();
  Logger log(options.verbose ? LogLevel::kInfo : LogLevel::kWarn);

  const int64_t max_memory = ParseByteSize(co.max_memory);
  if (max_memory < 0) return Fail(InvalidArgument("--max-memory: '" + co.max_memory + "' is not a size"));
  const int64_t cache_max = ParseByteSize(co.cache_max);
  if (cache_max < 0) return Fail(InvalidArgument("--cache-max: '" + co.cache_max + "' is not a size"));
  const std::string public_host = HostOf(co.flags.advertise.empty() ? co.flags.listen : co.flags.advertise);
  // Peers connect to this node's worker service and API at this host.
  if (public_host == "0.0.0.0" || public_host.empty()) {
    return Fail(InvalidArgument("--listen " + co.flags.listen + " is no address peers can reach: give --advertise HOST:PORT"));
  }
  ClusterFlags flags = co.flags;
  flags.secret = options.dist.secret;  // one secret: membership and the data plane
  flags.secret_file = options.dist.secret_file;
  auto c = ClusterOptionsOf(flags);
  if (!c.ok()) return Fail(c.status());
  auto derived = comm::DeriveChannelKey(c->secret);
  if (!derived.ok()) return Fail(derived.status());
  // --insecure: the secret still admits members, but the ranks' links and the relayed API
  // requests travel in clear (benchmarks on a trusted network; the capture test's control).
  std::optional<comm::ChannelKey> data_key;
  if (options.dist.insecure) {
    log.Warn("--insecure: prompts, answers, API keys and activations between nodes travel unencrypted; "
             "anyone on the network can read them");
  } else {
    data_key = *derived;
  }
  // A request relayed to a coordinator cut off the network ends once the coordinator is
  // suspect and has been quiet for a second (proxy.h): say when that exceeds 5 s.
  if (co.flags.suspect_ms + server::ProxyOptions{}.quiet_ms > 5000) {
    log.Warn("--suspect-ms {}: requests through this node to a coordinator cut off the network fail only ~{} ms "
             "after the cut",
             co.flags.suspect_ms, co.flags.suspect_ms + server::ProxyOptions{}.quiet_ms);
  }
  auto started = cluster::ClusterNode::Start(*c, &log);
  if (!started.ok()) return Fail(started.status());
  cluster::ClusterNode& node = **started;
  const std::string name = node.Snapshot().members.front().name;
  // One models directory: what the node registers at start, what the API may load (by name,
  // besides -m's file), and where `cohort rm` deletes.
  const std::string models_dir =
      !co.models_dir.empty() ? co.models_dir : (co.flags.state_dir.empty() ? "" : co.flags.state_dir + "/models");
  cluster::ModelRegistryOptions models;
  models.models_dir = models_dir;
  if (co.model_flag != nullptr && co.model_flag->count() > 0) models.command_line.push_back(options.model);
  cluster::ModelRegistry registry(node, log, models);

  cluster::WorkerServiceOptions w;
  // The fixed ports a firewall opens follow --listen's (app_common.h).
  const std::string worker = WorkerListenOf(co.flags.listen);  // HOST:PORT, always with a colon
  w.listen = co.worker_listen.empty() ? public_host + worker.substr(worker.rfind(':')) : co.worker_listen;
  auto data_ports = DataPortsOf(options.dist.data_ports, co.flags.listen);
  if (!data_ports.ok()) return Fail(data_ports.status().Annotate("--data-ports"));
  w.data_ports = *data_ports;
  w.slots = co.worker_slots;
  w.slots_per_coordinator = co.worker_slots_per_coordinator;
  w.cache_dir = !co.cache_dir.empty() ? co.cache_dir : (co.flags.state_dir.empty() ? "" : co.flags.state_dir + "/cache");
  w.known_files = [&registry] { return registry.KnownFiles(); };
  w.cache_bytes_max = static_cast<uint64_t>(cache_max);
  // Jobs come only from the cluster's members and name only their hosts.
  w.member_hosts = [&node] {
    std::set<std::string> hosts;
    for (const cluster::MemberView& m : node.Snapshot().members) hosts.insert(HostOf(m.address));
    return hosts;
  };
  w.key = data_key;
  w.insecure = options.dist.insecure;
  auto workers = cluster::WorkerService::Bind(w, log);
  if (!workers.ok() && co.worker_listen.empty()) {
    // The derived default port is taken (another program, or a test's random --listen): any
    // port works, since peers learn the worker's address through membership, but a firewall
    // that opens only the documented ports will block it, so say so loudly.
    const std::string wanted = w.listen;
    w.listen = wanted.substr(0, wanted.rfind(':')) + ":0";
    auto moved = cluster::WorkerService::Bind(w, log);
    if (moved.ok()) {
      log.Warn("the worker port {} is not free ({}); serving workers on {} instead: a firewall that opens only "
               "the documented ports will block it (pass --worker-listen to fix the port)",
               wanted, workers.status().ToString(), (*moved)->address());
      workers = std::move(moved);
    }
  }
  if (!workers.ok()) return Fail(workers.status());

  server::ServerOptions http_options = HttpOptionsOf(options);
  http_options.open_paths = {"/health"};  // the cluster's routes change what the cluster runs
  http_options.relay_timeout_s = co.forward_timeout_s;
  // Requests relayed between nodes go over their own port, TLS keyed by the secret
  // (server/relay_channel.h), whatever the client-facing port speaks (--tls-cert or not).
  http_options.relay_key = data_key;
  if (data_key.has_value()) {
    const std::string relay = ListenPlus(co.flags.listen, kRelayPortOffset);  // HOST:PORT
    http_options.relay_listen = co.relay_listen.empty() ? public_host + relay.substr(relay.rfind(':')) : co.relay_listen;
    http_options.relay_listen_may_move = co.relay_listen.empty();
    http_options.relay_admit_host = [&w](const std::string& host) { return w.member_hosts().count(host) > 0; };
  }
  server::HttpServer http(http_options, log);
  auto port = http.Bind();
  if (!port.ok()) return Fail(port.status());

  cluster::ReconcilerOptions r = ReconcilerOptionsOf(options, name);
  r.host.key = data_key;
  r.host.data_ports = *data_ports;
  r.worker = (*workers)->address();
  r.api = options.host + ":" + std::to_string(*port);
  const std::string relay_host = HostOf(http_options.relay_listen);
  r.relay = !data_key.has_value() ? r.api  // plain relays, to the API itself
                                  : (relay_host == "0.0.0.0" ? public_host : relay_host) + ":" + std::to_string(http.relay_port());
  r.max_memory_bytes = max_memory;
  r.state_dir = co.flags.state_dir;
  r.cache_dir = w.cache_dir;
  r.models_dir = models_dir;
  cluster::Reconciler reconciler(node, registry, r, log);
  server::ClusterRouter router(node, reconciler.host());
  http.ServeInstances(router, /*single_model=*/false);
  server::AddClusterRoutes(http, node, reconciler, {co.nodes, options.dist.layout});

  (*workers)->Start();
  reconciler.Start();
  http.Start();
  std::fprintf(stderr, "%s cohort serve: node %s (%s) control %s, workers %s, data ports %s, relay %s, API %s://%s\n",
               LogTimestamp().c_str(), node.id().Hex().c_str(), name.c_str(), node.address().c_str(),
               (*workers)->address().c_str(), data_ports->ToString().c_str(), r.relay.c_str(),
               http.tls() ? "https" : "http", r.api.c_str());
  std::fflush(stderr);
  if (co.model_flag != nullptr && co.model_flag->count() > 0) {
    reconciler.ProposeAtStart(options.model, options.dist.layout, co.nodes);
  }

  WaitForStop(stop_signals, [] { return true; }, [&] {
    if (Status st = http.ReloadKeys(); !st.ok()) log.Error("SIGHUP: keys kept as they were: {}", st.ToString());
  });
  (void)http.Stop();
  reconciler.Stop();
  node.Stop();
  (*workers)->Stop();
  std::fprintf(stderr, "%s cohort serve: node stopped\n", LogTimestamp().c_str());
  return 0;
}

}  // namespace cohort::app
