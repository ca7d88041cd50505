// InstanceHost: the coordinator's side of the instances placed with this node as rank 0. For
// each one it opens the model — alone, or with the placed ShardPlan over the other ranks'
// worker services (parallel::DistributedModel) — as an engine::ServingInstance, reports the
// outcome in the agreed state (ready, with the API address that serves it and the plan its
// ranks run, or failed), watches it for a forward failure, and stops it when the placement
// moves. The HTTP front finds the instances served here with Find().
#pragma once

#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "cluster/instance_progress.h"
#include "comm/tcp_transport.h"
#include "core/log.h"
#include "core/status.h"
#include "engine/serving.h"
#include "parallel/session.h"

namespace cohort::cluster {

struct InstanceHostOptions {
  std::string api;                  // this node's API host:port, which serves its instances
  std::string relay;                // where other nodes relay requests to it (RunReport::relay)
  engine::ServingOptions serving;   // compute threads, slots, context, template (name: the model's)
  int worker_threads = 1;           // each worker rank's
  std::chrono::milliseconds comm_timeout{3000};    // bounds a collective on a dead link
  std::chrono::milliseconds setup_timeout{10000};  // bounds connecting the ranks
  comm::LinkEmulation link;         // TCP link emulation between ranks (tests, demos)
  parallel::PortRange data_ports;   // the coordinator's data listener (any: the system's choice)
  std::optional<comm::ChannelKey> key;  // the cluster's data-plane key (encrypts the ranks' links)
};

// `instance` opened as its coordinator runs it, and the plan its ranks run (a distributed
// instance; empty stages when it runs whole here).
struct OpenedInstance {
  std::unique_ptr<engine::ServingInstance> serving;
  plan::ShardPlan plan;
};
// Blocks while the ranks load. `progress` (may be null) is given the ranks' totals and follows
// the transfers and loads; has_file[r]: rank r's node holds the model (nothing to stream).
Result<OpenedInstance> OpenInstance(const Instance& instance, const InstanceHostOptions& options, Logger& log,
                                    InstanceProgress* progress = nullptr, std::vector<bool> has_file = {});

class InstanceHost {
 public:
  // Borrowed: `node` and `log` outlive the host.
  InstanceHost(ClusterNode& node, const InstanceHostOptions& options, Logger& log);
  ~InstanceHost();  // Stop()
  InstanceHost(const InstanceHost&) = delete;
  InstanceHost& operator=(const InstanceHost&) = delete;

  // Starts, replaces, watches and stops the instances `snap` places here (one thread calls
  // it, the reconcile loop).
  void Coordinate(const ClusterSnapshot& snap);
  // Stops every instance and waits until they are gone.
  void Stop();

  // The instance `id` at `epoch` while it is served here, else null. Any thread; a request
  // keeps the instance alive until it ends, even when the placement has moved meanwhile.
  std::shared_ptr<engine::ServingInstance> Find(const std::string& id, uint64_t epoch) const;

 private:
  struct Slot {
    uint64_t epoch = 0;
    std::future<Result<OpenedInstance>> loading;
    std::shared_ptr<InstanceProgress> progress;  // while loading
    std::chrono::steady_clock::time_point progress_reported{};
    uint64_t progress_bytes_reported = 0;
    std::string progress_phase_reported;
    std::shared_ptr<engine::ServingInstance> serving;
    plan::ShardPlan plan;            // what its ranks run (distributed instances)
    Status load_error;
    bool reported = false;           // the outcome of loading reached the state
    bool failure_reported = false;   // a later forward failure did
  };

  void Watch(const std::string& id, Slot& slot);
  // Publishes (and logs) how far a loading slot has come, about once a second.
  void ReportProgress(const std::string& id, Slot& slot);
  bool Report(const std::string& id, const RunReport& report);
  void Publish(const std::string& id, const Slot& slot);  // Find()'s view of `slot`
  void Retire(const std::string& id, Slot&& slot);
  void ReapLoop();

  ClusterNode& node_;
  InstanceHostOptions options_;
  Logger& log_;
  const std::string self_;          // node id hex
  std::map<std::string, Slot> slots_;  // by instance id; the loop thread only

  mutable std::mutex serving_mutex_;
  std::map<std::string, std::pair<uint64_t, std::shared_ptr<engine::ServingInstance>>> serving_;

  std::mutex reap_mutex_;
  std::condition_variable reap_cv_;
  std::vector<Slot> retired_;
  bool reap_stop_ = false;
  std::thread reap_thread_;
};

}  // namespace cohort::cluster
