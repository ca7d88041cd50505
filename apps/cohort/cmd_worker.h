// `cohort worker` and the distributed options of `run` and `logits`: a worker serves shards of
// a model for a coordinator; the coordinator spreads a model over workers it is given
// (--workers) or spawns on this host (--local-ranks) and runs it as if it were local.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace CLI {
class App;
}
namespace cohort::gguf {
class File;
}
namespace cohort::parallel {
class DistributedModel;
}
namespace cohort::engine {
class LoadedModel;
}

namespace cohort::app {

struct DistOptions {
  std::string workers;        // "host:port,host:port": ranks 1..N-1 (the coordinator is rank 0)
  int local_ranks = 0;        // N ranks on this host: the coordinator plus N-1 spawned workers
  std::string layout = "tp";  // tp | pp | hybrid | hybrid:STAGES
  std::string shares;         // "2,1,1": per-rank weights (pp: per-stage layer weights)
  std::string transport = "tcp";  // tcp | shm (shm: --local-ranks only) | ucx
  int worker_threads = 0;     // threads per spawned/remote worker; 0: the coordinator's -t
  int64_t link_latency_us = 0;    // TCP link emulation: added one-way delay
  double link_gbit = 0;           // TCP link emulation: bandwidth cap per link (Gbit/s)
  bool verbose_workers = false;   // spawned workers log to stderr (set from -v)
  bool mpi = false;               // ranks from mpirun: rank 0 runs the command, others serve
  // The cluster secret: the workers must hold the same one; every connection between ranks is
  // then authenticated and encrypted. `insecure`: plain TCP, UCX and MPI across machines.
  std::string secret;
  std::string secret_file;
  bool insecure = false;
  std::string data_ports;         // the coordinator's data listener: PORT or FIRST-LAST ("": any)
  bool enabled() const { return mpi || !workers.empty() || local_ranks > 1; }
};

// Adds --workers, --local-ranks, --layout, --shares, --transport, --worker-threads, the
// link-emulation options and --secret/--secret-file/--insecure to a subcommand.
void AddDistOptions(CLI::App* cmd, DistOptions* options);

// Workers this process spawned on this host (--local-ranks): reaped when destroyed, which
// must come after the model that uses them is gone.
class LocalWorkers {
 public:
  LocalWorkers() = default;
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;
  void Add(int pid) { pids_.push_back(pid); }

 private:
  std::vector<int> pids_;
};

// The model of --workers / --local-ranks / --mpi over `file` (this process's copy of
// `model_path`, which must outlive it): rank 0 here. Spawned workers go into `spawned`. Under
// mpirun, a rank other than 0 serves inside this call and then ends the process.
Result<std::unique_ptr<parallel::DistributedModel>> StartDistributed(const DistOptions& options,
                                                                     const std::string& model_path,
                                                                     const gguf::File& file, int threads,
                                                                     LocalWorkers* spawned);

// The model `run` and `serve` use: whole in this process, or spread as `options` says (then
// `*distributed` points at it, for --verbose).
Result<std::unique_ptr<engine::LoadedModel>> OpenModel(const std::string& path, const DistOptions& options,
                                                       int threads, LocalWorkers* spawned,
                                                       parallel::DistributedModel** distributed = nullptr);

struct WorkerOptions {
  std::string listen = "0.0.0.0:7070";
  bool once = false;  // exit after one job (spawned local workers)
  // Streamed model shares and remembered file digests; default DefaultCacheDir().
  std::string cache_dir;
  std::string models_dir;  // where else to look for a job's model file, by file name
  std::string cache_max = "32G";  // bound on the streamed shares kept (LRU); "0": none
  std::string data_ports;  // each job's data listener (default: --listen's port + 4..53)
  std::string secret;       // coordinators must prove it; jobs run encrypted
  std::string secret_file;
  bool insecure = false;    // allow listening beyond loopback without a secret (benchmarks)
  // Hosts (IPv4, as peers connect from) allowed to coordinate jobs and to be a job's ranks;
  // empty: any host holding the secret (a standalone worker knows no membership).
  std::vector<std::string> allow_coordinators;
};

// $XDG_CACHE_HOME/cohort, else $HOME/.cache/cohort, else "" (nothing cached).
std::string DefaultCacheDir();

CLI::App* AddWorkerCommand(CLI::App& app, WorkerOptions* options);
int WorkerCommand(const WorkerOptions& options, bool verbose);

}  // namespace cohort::app
