// `cohort worker`, --local-ranks spawning, and the distributed model of run, serve and logits;
// see cmd_worker.h.
#include "cmd_worker.h"
#include "app_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include <CLI/CLI.hpp>

#include "cluster/instance_progress.h"
#include "comm/secure_channel.h"
#include "comm/socket_util.h"
#include "comm/tcp_transport.h"
#include "core/byte_size.h"
#include "core/log.h"
#include "engine/loaded_model.h"
#include "parallel/launch.h"
#include "parallel/model_plan.h"
#include "parallel/shard_bytes.h"
#include "progress_printer.h"

namespace cohort::app {
namespace {

constexpr const char* kListeningPrefix = "cohort worker: listening on ";

// Starts `cohort worker --listen 127.0.0.1:0 --once` and reads the address it got. A secret
// reaches the worker through an inherited pipe (--secret-file /dev/fd/N), never its argv.
Result<std::string> SpawnWorker(int threads, bool verbose, const std::string& secret, int* pid_out) {
  int out_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return IoError("pipe failed");
  int secret_pipe[2] = {-1, -1};
  if (!secret.empty()) {
    if (::pipe2(secret_pipe, O_CLOEXEC) != 0) return IoError("pipe failed");
    const std::string line = secret + "\n";  // at most 4 KiB: fits the pipe's buffer
    const bool written = ::write(secret_pipe[1], line.data(), line.size()) == static_cast<ssize_t>(line.size());
    ::close(secret_pipe[1]);
    if (!written) {
      ::close(secret_pipe[0]);
      return IoError("could not hand the secret to a spawned worker");
    }
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return IoError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // The worker must not outlive its coordinator.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    const std::string t = std::to_string(threads);
    std::vector<const char*> argv = {"cohort", "-t", t.c_str()};
    if (verbose) argv.push_back("-v");
    for (const char* a : {"worker", "--listen", "127.0.0.1:0", "--once"}) argv.push_back(a);
    std::string secret_path;
    if (secret_pipe[0] >= 0) {
      secret_path = "/dev/fd/" + std::to_string(::dup(secret_pipe[0]));  // dup: not close-on-exec
      argv.push_back("--secret-file");
      argv.push_back(secret_path.c_str());
    }
    argv.push_back(nullptr);
    ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  if (secret_pipe[0] >= 0) ::close(secret_pipe[0]);
  *pid_out = pid;
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  char ch;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out_pipe[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (::read(out_pipe[0], &ch, 1) != 1) break;
    if (ch == '\n') break;
    line += ch;
  }
  ::close(out_pipe[0]);
  if (line.rfind(kListeningPrefix, 0) != 0) {
    return Unavailable("spawned worker did not report its address (got '" + line + "')");
  }
  return line.substr(std::strlen(kListeningPrefix));
}

void Reap(const std::vector<int>& pids) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

std::string DefaultCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/') {
    return std::string(xdg) + "/cohort";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] == '/') {
    return std::string(home) + "/.cache/cohort";
  }
  return "";
}

void AddDistOptions(CLI::App* cmd, DistOptions* o) {
  cmd->add_option("--workers", o->workers, "distributed: worker addresses host:port,... (ranks 1..N-1)");
  cmd->add_option("--local-ranks", o->local_ranks, "distributed: N ranks on this host (this process + N-1 spawned workers)")
      ->check(CLI::Range(0, 256));
  cmd->add_option("--layout", o->layout, "distributed layout: tp, pp, hybrid or hybrid:STAGES");
  cmd->add_option("--shares", o->shares, "distributed: per-rank weights, e.g. 2,1,1 (pp: per stage)");
  cmd->add_option("--transport", o->transport, "distributed data transport: tcp, shm (local ranks) or ucx")
      ->check(CLI::IsMember({"tcp", "shm", "ucx"}));
  cmd->add_option("--worker-threads", o->worker_threads, "threads per worker (default: -t)");
  cmd->add_option("--link-latency-us", o->link_latency_us, "TCP link emulation: added one-way delay (us)");
  cmd->add_option("--link-gbit", o->link_gbit, "TCP link emulation: bandwidth cap per link (Gbit/s)");
  cmd->add_flag("--mpi", o->mpi, "distributed: ranks from mpirun (mpirun -np N cohort ... --mpi)");
  cmd->add_option("--secret", o->secret, "the cluster secret: authenticates and encrypts every link between ranks");
  cmd->add_option("--secret-file", o->secret_file, "file whose first line is the cluster secret");
  cmd->add_flag("--insecure", o->insecure, "no secret: plain links (UCX, MPI across machines); trusted networks only");
  cmd->add_option("--data-ports", o->data_ports,
                  "distributed: port(s) of this rank's data listener, PORT or FIRST-LAST (default: any; serve --cluster: "
                  "--listen's port + 4..53)");
}

namespace {

// Whether every rank mpirun started is on this host (Open MPI and MPICH say so in the
// environment); unknown counts as no.
bool MpiRanksAllLocal() {
  for (auto [local, world] : {std::pair{"OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"},
                              std::pair{"MPI_LOCALNRANKS", "PMI_SIZE"}}) {
    const char* l = std::getenv(local);
    const char* w = std::getenv(world);
    if (l != nullptr && w != nullptr) return std::string(l) == std::string(w);
  }
  return false;
}

}  // namespace

LocalWorkers::~LocalWorkers() { Reap(pids_); }

Result<std::unique_ptr<parallel::DistributedModel>> StartDistributed(const DistOptions& options,
                                                                     const std::string& model_path,
                                                                     const gguf::File& file, int threads,
                                                                     LocalWorkers* spawned) {
  if (!options.workers.empty() && options.local_ranks > 1) {
    return InvalidArgument("give --workers or --local-ranks, not both");
  }
  std::vector<double> shares;
  if (!options.shares.empty()) {
    COHORT_ASSIGN_OR_RETURN(shares, parallel::ParseShares(options.shares));
  }
  const int worker_threads = options.worker_threads > 0 ? options.worker_threads : threads;
  COHORT_ASSIGN_OR_RETURN(const std::string secret, ReadSecret(options.secret, options.secret_file));
  if (!secret.empty() && options.insecure) return InvalidArgument("give a secret or --insecure, not both");
  if (options.mpi) {
    if (!options.workers.empty() || options.local_ranks > 1) {
      return InvalidArgument("--mpi takes its ranks from mpirun, not --workers/--local-ranks");
    }
    // MPI moves the activations itself: our encryption cannot wrap them.
    if (!secret.empty()) {
      return Unsupported("--mpi cannot carry the data-plane encryption: use --workers with --secret, or --mpi "
                         "--insecure on a trusted network");
    }
    if (!options.insecure && !MpiRanksAllLocal()) {
      return InvalidArgument("--mpi ranks on other machines travel unencrypted: pass --insecure to allow it");
    }
    parallel::DistributedModel::MpiOptions m;
    m.layout = options.layout;
    m.shares = shares;
    m.threads = worker_threads;
    Logger log(options.verbose_workers ? LogLevel::kInfo : LogLevel::kWarn, stderr, "mpi");
    m.log = &log;
    Status served;
    COHORT_ASSIGN_OR_RETURN(auto model, parallel::DistributedModel::AdoptMpi(m, file, &served));
    if (model == nullptr) {
      // A worker rank has served; the command's own work is rank 0's.
      if (!served.ok()) std::fprintf(stderr, "cohort (mpi worker rank): %s\n", served.ToString().c_str());
      std::exit(served.ok() ? 0 : 1);
    }
    return model;
  }
  parallel::SessionOptions s;
  s.model_path = model_path;
  s.worker_threads = worker_threads;
  s.transport = options.transport == "shm"   ? parallel::DataTransport::kShm
                : options.transport == "ucx" ? parallel::DataTransport::kUcx
                                             : parallel::DataTransport::kTcp;
  s.link.latency_us = options.link_latency_us;
  s.link.bandwidth_bytes_per_s = static_cast<int64_t>(options.link_gbit * 1e9 / 8);
  COHORT_ASSIGN_OR_RETURN(s.data_ports, parallel::PortRange::Parse(options.data_ports));
  if (!secret.empty()) {
    COHORT_ASSIGN_OR_RETURN(s.key, comm::DeriveChannelKey(secret));
  }
  // The same digest store the workers on this host use: a local worker finds our hash there.
  if (const std::string cache = DefaultCacheDir(); !cache.empty()) s.digest_cache_dir = cache + "/digests";
  if (options.local_ranks > 1) {
    for (int r = 1; r < options.local_ranks; ++r) {
      int pid = -1;
      auto address = SpawnWorker(s.worker_threads, options.verbose_workers, secret, &pid);
      if (pid > 0) spawned->Add(pid);
      if (!address.ok()) return address.status();
      s.workers.push_back(*address);
    }
  } else {
    s.workers = SplitCommaList(options.workers);
    if (s.transport == parallel::DataTransport::kShm) {
      return InvalidArgument("--transport shm needs --local-ranks (every rank on this host)");
    }
  }
  const int n_ranks = static_cast<int>(s.workers.size()) + 1;
  COHORT_ASSIGN_OR_RETURN(plan::LayoutSpec spec, parallel::ParseLayout(options.layout, n_ranks, shares));
  COHORT_ASSIGN_OR_RETURN(s.plan, parallel::PlanOfModel(file, spec));
  // The setup's progress on stderr, a bar on a terminal and plain lines otherwise: every
  // worker's share streamed (none for a worker that holds the file or a cached copy) and read,
  // with rank 0's own read, against totals fixed up front so the percent only grows.
  std::vector<cluster::InstanceProgress::Rank> ranks;
  for (int r = 0; r < n_ranks; ++r) {
    COHORT_ASSIGN_OR_RETURN(auto ranges, parallel::ShardByteRanges(file, s.plan, r));
    const uint64_t bytes = parallel::TotalBytes(ranges);
    ranks.push_back({"", r == 0 ? "this process" : s.workers[r - 1], r == 0 ? 0 : bytes, bytes});
  }
  struct Shown {
    cluster::InstanceProgress meter{0};
    std::mutex mutex;
    ProgressPrinter printer{"workers"};
  };
  auto shown = std::make_shared<Shown>();
  shown->meter.SetRanks(std::move(ranks));
  s.progress = [shown](int rank, const std::string& phase, uint64_t done, uint64_t total) {
    shown->meter.Update(rank, phase, done, total);
    const cluster::LoadProgress p = shown->meter.Snapshot();
    std::lock_guard<std::mutex> lock(shown->mutex);
    shown->printer.Show(p.figures, p.phase);
  };
  auto model = parallel::DistributedModel::Connect(s, file);
  std::lock_guard<std::mutex> lock(shown->mutex);
  shown->printer.End();
  return model;
}

Result<std::unique_ptr<engine::LoadedModel>> OpenModel(const std::string& path, const DistOptions& options,
                                                       int threads, LocalWorkers* spawned,
                                                       parallel::DistributedModel** distributed) {
  engine::LoadOptions load;
  if (options.enabled()) {
    load.make_model = [&](const gguf::File& file) -> Result<std::unique_ptr<model::Model>> {
      COHORT_ASSIGN_OR_RETURN(auto model, StartDistributed(options, path, file, threads, spawned));
      if (distributed != nullptr) *distributed = model.get();
      return std::unique_ptr<model::Model>(std::move(model));
    };
  }
  return engine::LoadedModel::Open(path, load);
}

CLI::App* AddWorkerCommand(CLI::App& app, WorkerOptions* o) {
  CLI::App* cmd = app.add_subcommand("worker", "serve model shards for a coordinator (cohort run|logits --workers)");
  cmd->add_option("--listen", o->listen, "control address host:port (port 0: any; printed on stdout)");
  cmd->add_flag("--once", o->once, "exit after one job");
  cmd->add_option("--cache-dir", o->cache_dir,
                  "where streamed model shares and file digests are kept (default: ~/.cache/cohort)");
  cmd->add_option("--models-dir", o->models_dir, "also look for a job's model file (by name) here");
  cmd->add_option("--cache-max", o->cache_max, "bound on the streamed shares kept (bytes; K/M/G; LRU evicted)");
  cmd->add_option("--data-ports", o->data_ports,
                  "ports of each job's data listener, PORT or FIRST-LAST (default: --listen's port + 4..53; any when it is 0)");
  cmd->add_option("--secret", o->secret, "the cluster secret: coordinators must prove it; links are encrypted");
  cmd->add_option("--secret-file", o->secret_file, "file whose first line is the cluster secret");
  cmd->add_flag("--insecure", o->insecure, "listen beyond loopback without a secret (benchmarks on a trusted network)");
  cmd->add_option("--allow-coordinator", o->allow_coordinators,
                  "only these hosts may coordinate jobs or be their ranks (IPv4, comma-separated; default: any)")
      ->delimiter(',');
  return cmd;
}

namespace {

// The worker's key, or none: refused beyond loopback without --insecure, which is loud.
Result<std::optional<comm::ChannelKey>> WorkerKey(const WorkerOptions& options) {
  COHORT_ASSIGN_OR_RETURN(const std::string secret, ReadSecret(options.secret, options.secret_file));
  if (!secret.empty() && options.insecure) return InvalidArgument("give a secret or --insecure, not both");
  if (!secret.empty()) {
    COHORT_ASSIGN_OR_RETURN(comm::ChannelKey key, comm::DeriveChannelKey(secret));
    return std::optional<comm::ChannelKey>(key);
  }
  COHORT_ASSIGN_OR_RETURN(const comm::SocketAddress addr, comm::SocketAddress::Parse(options.listen));
  const bool loopback = (ntohl(addr.addr.sin_addr.s_addr) >> 24) == 127;
  if (!loopback && !options.insecure) {
    return InvalidArgument("listening on " + options.listen +
                           " beyond loopback needs --secret or --secret-file (or --insecure on a trusted network)");
  }
  if (!loopback) {
    std::fprintf(stderr,
                 "cohort worker: WARNING: --insecure: anyone who can reach %s can run jobs here and read every "
                 "prompt and activation in clear\n",
                 options.listen.c_str());
  }
  return std::optional<comm::ChannelKey>();
}

}  // namespace

int WorkerCommand(const WorkerOptions& options, bool verbose) {
  Logger log(verbose ? LogLevel::kInfo : LogLevel::kWarn, stderr, "worker");
  const int64_t cache_max = ParseByteSize(options.cache_max);
  if (cache_max < 0) {
    std::fprintf(stderr, "cohort worker: --cache-max: '%s' is not a size\n", options.cache_max.c_str());
    return 1;
  }
  auto data_ports = DataPortsOf(options.data_ports, options.listen);
  if (!data_ports.ok()) {
    std::fprintf(stderr, "cohort worker: --data-ports: %s\n", data_ports.status().ToString().c_str());
    return 1;
  }
  auto key = WorkerKey(options);
  if (!key.ok()) {
    std::fprintf(stderr, "cohort worker: %s\n", key.status().ToString().c_str());
    return 1;
  }
  auto listener = comm::TcpListener::Bind(options.listen);
  if (!listener.ok()) {
    std::fprintf(stderr, "cohort worker: %s\n", listener.status().ToString().c_str());
    return 1;
  }
  parallel::WorkerEnvironment env;
  env.cache_dir = options.cache_dir.empty() ? DefaultCacheDir() : options.cache_dir;
  env.models_dir = options.models_dir;
  env.cache_bytes_max = static_cast<uint64_t>(cache_max);
  env.data_ports = *data_ports;
  env.key = *key;
  if (!options.allow_coordinators.empty()) {
    // Checked per job on the control connection's peer and every data address (session.cc),
    // so a secret leaked to another host does not let that host run jobs here.
    const std::set<std::string> allowed(options.allow_coordinators.begin(), options.allow_coordinators.end());
    env.allowed_host = [allowed](const std::string& host) { return allowed.count(host) > 0; };
  }
  std::printf("%s%s\n", kListeningPrefix, (*listener)->address().c_str());
  std::fflush(stdout);
  for (;;) {
    const Status st = parallel::ServeOneJob((*listener)->fd(), env, &log);
    if (!st.ok()) std::fprintf(stderr, "cohort worker: job ended: %s\n", st.ToString().c_str());
    if (options.once) return st.ok() ? 0 : 1;
  }
}

}  // namespace cohort::app
