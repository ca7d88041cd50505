// WorkerService: a cluster node's worker port. `slots` threads each take one job at a time
// (parallel::ServeOneJob) from the same listener, so a job stuck on a peer cut off the
// network does not keep new ones out. Shares of models this node lacks are streamed from the
// coordinator into the cache directory (bounded, least recently used shares evicted); the
// node's verified model files are used directly. Jobs are hostile input (job_limits.h): every
// field bounded, only cluster members' hosts admitted and connected to, a share of the slots
// per coordinator.
// The service owns its threads: Stop() wakes the idle ones, shuts down the connections of the
// running jobs (their coordinators see the worker leave), and joins them all.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/tcp_transport.h"
#include "core/log.h"
#include "core/status.h"
#include "parallel/job_limits.h"
#include "parallel/running_jobs.h"
#include "parallel/session.h"

namespace cohort::cluster {

struct WorkerServiceOptions {
  std::string listen;     // host:port (port 0: any)
  int slots = 4;          // jobs at once
  std::string cache_dir;  // streamed shares and digests ("": local files only)
  // The model files this node holds and has verified (sha256 -> path), asked per job.
  std::function<std::map<std::string, std::string>()> known_files;
  // Jobs one coordinator host may hold at once; 0: slots - 1 (at least 1), so one peer
  // cannot take every slot.
  int slots_per_coordinator = 0;
  // The hosts of the cluster's members, asked per job: a job from another host, or one naming
  // a data address on another host, is refused. Unset: any host (a standalone worker).
  std::function<std::set<std::string>()> member_hosts;
  uint64_t cache_bytes_max = 0;  // streamed shares kept, LRU-evicted beyond it; 0: no bound
  parallel::PortRange data_ports;  // each job's data listener (any: the system's choice)
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
  WorkerService(const WorkerServiceOptions& options, Logger& log)
      : options_(options),
        log_(log),
        peer_slots_(options.slots_per_coordinator > 0 ? options.slots_per_coordinator
                                                      : std::max(1, options.slots - 1)) {}
  void Run();

  WorkerServiceOptions options_;
  Logger& log_;
  std::unique_ptr<comm::TcpListener> listener_;
  parallel::RunningJobs running_;
  parallel::PeerSlots peer_slots_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

}  // namespace cohort::cluster
