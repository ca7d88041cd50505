// Reconciler: what one `cohort serve --cluster` node does besides answering HTTP. A loop reads
// the agreed state a few times a second and (1) publishes this node's services (worker
// address, API address, memory budget, the model files it holds), (2) as leader, places
// instances (Placer), (3) as coordinator, runs the instances placed here (InstanceHost),
// (4) remembers the instances in the state directory and deletes the files of removed
// models. At start it registers the models directory's files and proposes the instances it
// remembers (reconciler_store.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "cluster/instance_host.h"
#include "cluster/instance_store.h"
#include "cluster/model_registry.h"
#include "cluster/placer.h"
#include "core/log.h"

namespace cohort::cluster {

struct ReconcilerOptions {
  std::string name;
  std::string worker;              // this node's worker service host:port
  std::string api;                 // this node's public API host:port
  std::string relay;               // its relay listener's host:port (InstanceHostOptions::relay)
  int64_t max_memory_bytes = 0;
  PlacerOptions placer;
  InstanceHostOptions host;        // its `api` and `relay` are set from those above
  int tick_ms = 200;
  std::string state_dir;   // instances.json is kept here ("": instances are not remembered)
  std::string models_dir;  // its *.gguf are registered at start; `cohort rm` deletes there
  std::string cache_dir;   // streamed shares; `cohort rm` deletes the removed model's there
  int restore_window_ms = 60000;  // how long stored instances are proposed after a start
};

class Reconciler {
 public:
  // Borrowed: `node`, `registry` and `log` outlive the reconciler.
  Reconciler(ClusterNode& node, ModelRegistry& registry, const ReconcilerOptions& options, Logger& log);
  ~Reconciler();  // Stop()
  Reconciler(const Reconciler&) = delete;
  Reconciler& operator=(const Reconciler&) = delete;

  void Start();
  void Stop();  // stops the loop and every instance hosted here

  // ModelRegistry::Resolve, then waits until the agreed state lists this node as a holder of
  // the file, so a placement proposed next finds one.
  Result<ModelEntry> ResolveModel(const std::string& path_or_name);
  // What a client names (untrusted): a file this node offers (ModelRegistry::RequestedFile),
  // else a model the cluster knows by name.
  Result<ModelEntry> ResolveRequestedModel(const std::string& requested);
  // `path`'s model becomes an instance with `layout` on `nodes` nodes (the same id from every
  // node that names it), retried for a while since the cluster may still be forming. Runs on
  // a thread of its own, ended by Stop().
  void ProposeAtStart(const std::string& path, const std::string& layout, int nodes);
  // The instances served here (the HTTP front's local routes).
  const InstanceHost& host() const { return host_; }
  // What the placer counts (KV slots and context), for a placement preview.
  const PlacerOptions& placer_options() const { return options_.placer; }

 private:
  void Loop();
  // Proposes this node's NodeService when the state's differs (at most once a second unless
  // `now`); called by the loop and by ResolveModel.
  void PublishSelf(const ClusterSnapshot& snap, bool now);
  // Start-up: the models directory registered, then the remembered instances proposed until
  // they stay in the agreed state (a merge with a node that led alone may drop them).
  void Restore();
  void WaitForPeers();  // Restore's first step
  // Keeps instances.json equal to what the state asks for (after Restore), and deletes this
  // node's copies of removed models.
  void Persist(const ClusterSnapshot& snap);
  void DeleteRemoved(const Records& records);

  ClusterNode& node_;
  ModelRegistry& registry_;
  ReconcilerOptions options_;
  Logger& log_;
  const std::string self_;  // node id hex
  Placer placer_;
  InstanceHost host_;

  std::atomic<bool> stop_{false};
  std::thread loop_thread_;
  std::thread startup_thread_;
  std::thread restore_thread_;
  std::atomic<bool> restored_{false};
  std::vector<StoredInstance> saved_;           // Loop thread only
  std::set<std::string> removed_done_;          // Loop thread only: sha256s handled
  std::mutex publish_mutex_;
  uint64_t last_publish_ms_ = 0;  // guarded by publish_mutex_
};

}  // namespace cohort::cluster
