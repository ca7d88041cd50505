// ClusterDaemon: what one `cohort serve --cluster` node does besides answering HTTP. A
// reconcile loop reads the agreed state a few times a second and (1) publishes this node's
// services (worker address, API address, memory budget, the model files it holds), (2) as
// leader, places pending instances with the planner and re-places those that lost a node or
// whose coordinator reported a failure, and (3) as coordinator of an instance, starts,
// replaces or stops its InstanceRunner and reports the outcome.
#pragma once

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "cluster_runner.h"
#include "core/log.h"

namespace cohort::app {

// The model files a node holds and has verified (sha256 -> path): written by the daemon,
// read by the worker service's threads, which may outlive the daemon at exit.
class KnownFiles {
 public:
  std::map<std::string, std::string> Get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return files_;
  }
  void Set(std::map<std::string, std::string> files) {
    std::lock_guard<std::mutex> lock(mutex_);
    files_ = std::move(files);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::string> files_;
};

struct DaemonOptions {
  std::string name;
  std::string worker;              // this node's worker service host:port
  std::string api;                 // this node's public API host:port
  int64_t max_memory_bytes = 0;
  int context_tokens = 0;          // KV per sequence the placement counts (0: the model's, <= 4096)
  int sequences = 4;               // KV slots the placement counts
  RunnerOptions runner;
  int tick_ms = 200;
  int replace_backoff_ms = 2000;   // between re-placements of one instance after a failure
};

class ClusterDaemon {
 public:
  // Borrowed: `node` and `log` outlive the daemon.
  ClusterDaemon(cluster::ClusterNode& node, const DaemonOptions& options, Logger& log);
  ~ClusterDaemon();  // stops the loop and every runner

  void Start();
  void Stop();

  // A GGUF path on this node (hashed and registered as a model) or the name of a model the
  // cluster knows.
  Result<cluster::ModelEntry> ResolveModel(const std::string& path_or_name);
  // The model files this node holds and has verified, for its worker service.
  std::shared_ptr<KnownFiles> known_files() const { return known_files_; }

 private:
  struct RunnerSlot {
    uint64_t epoch = 0;
    std::future<Result<std::unique_ptr<InstanceRunner>>> loading;
    std::unique_ptr<InstanceRunner> runner;
    Status load_error;
    bool reported = false;          // the outcome of loading reached the state
    bool failure_reported = false;  // a later forward failure did
  };

  void Loop();
  // Proposes this node's NodeService when the state's differs (at most once a second unless
  // `now`); called by the loop and by ResolveModel.
  void PublishSelf(const cluster::ClusterSnapshot& snap, bool now);
  // PublishSelf for a just-resolved model, waiting until the agreed state lists this node as
  // a holder of its file.
  void PublishHolding(const cluster::ModelEntry& entry);
  // The leader's view of the members: who may still hold a rank (not dead), who may get one
  // (alive, services published), and a signature of what placement depends on.
  struct LiveSet {
    std::set<std::string> present;
    std::vector<cluster::PlacementNode> candidates;
    size_t alive = 0;
    std::string signature;
  };
  static LiveSet Live(const cluster::ClusterSnapshot& snap);
  // Why `inst` should be (re)placed now, or nothing.
  std::optional<std::string> WhyPlace(const cluster::Instance& inst,
                                      const std::optional<cluster::RunReport>& run,
                                      const LiveSet& live, uint64_t now);
  Status PlaceOn(const cluster::ClusterSnapshot& snap, const LiveSet& live, cluster::Instance* next);
  void Lead(const cluster::ClusterSnapshot& snap);
  void Coordinate(const cluster::ClusterSnapshot& snap);
  bool Report(const std::string& id, const cluster::RunReport& report);
  void Retire(RunnerSlot&& slot);
  void ReapLoop();
  Result<std::string> Sha256Of(const std::string& path);

  cluster::ClusterNode& node_;
  DaemonOptions options_;
  Logger& log_;
  std::string self_;  // node id hex

  std::atomic<bool> stop_{false};
  std::thread loop_thread_;
  std::map<std::string, RunnerSlot> slots_;  // by instance id; loop thread only

  // Leader bookkeeping (loop thread only): when each instance was last (re)placed, and the
  // live set it was tried against.
  std::map<std::string, uint64_t> last_try_ms_;
  std::map<std::string, std::string> tried_on_;
  std::map<std::string, uint64_t> pending_since_ms_;
  std::mutex publish_mutex_;
  uint64_t last_publish_ms_ = 0;  // guarded by publish_mutex_
  std::shared_ptr<KnownFiles> known_files_ = std::make_shared<KnownFiles>();

  std::mutex hash_mutex_;
  std::map<std::string, std::pair<std::string, std::string>> hashes_;  // path -> (stamp, sha256)

  std::mutex reap_mutex_;
  std::condition_variable reap_cv_;
  std::vector<RunnerSlot> retired_;
  bool reap_stop_ = false;
  std::thread reap_thread_;
};

}  // namespace cohort::app
