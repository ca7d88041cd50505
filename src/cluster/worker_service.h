// WorkerService: a cluster node's worker port. `slots` threads each take one job at a time
// (parallel::ServeOneJob) from the same listener, so a job stuck on a peer cut off the
// network does not keep new ones out. Shares of models this node lacks are streamed from the
// coordinator into the cache directory; the node's verified model files are used directly.
// The service owns its threads: Stop() wakes the idle ones, shuts down the connections of the
// running jobs (their coordinators see the worker leave), and joins them all.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp_transport.h"
#include "core/log.h"
#include "core/status.h"
#include "parallel/running_jobs.h"

namespace cohort::cluster {

struct WorkerServiceOptions {
  std::string listen;     // host:port (port 0: any)
  int slots = 4;          // jobs at once
  std::string cache_dir;  // streamed shares and digests ("": local files only)
  // The model files this node holds and has verified (sha256 -> path), asked per job.
  std::function<std::map<std::string, std::string>()> known_files;
  // The cluster's data-plane key: coordinators must prove it, and jobs run encrypted.
  // Unset: plain, which Validate allows on loopback only unless `insecure`.
  std::optional<comm::ChannelKey> key;
  bool insecure = false;
  Status Validate() const;
};

class WorkerService {
 public:
  // Binds the listener; Start() begins taking jobs. `log` outlives the service.
  static Result<std::unique_ptr<WorkerService>> Bind(const WorkerServiceOptions& options, Logger& log);
  ~WorkerService();  // Stop()
  WorkerService(const WorkerService&) = delete;
  WorkerService& operator=(const WorkerService&) = delete;

  const std::string& address() const { return listener_->address(); }
  void Start();
  // Ends the running jobs and takes no new ones; returns once every thread has ended.
  void Stop();

 private:
  WorkerService(const WorkerServiceOptions& options, Logger& log) : options_(options), log_(log) {}
  void Run();

  WorkerServiceOptions options_;
  Logger& log_;
  std::unique_ptr<comm::TcpListener> listener_;
  parallel::RunningJobs running_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace cohort::cluster
