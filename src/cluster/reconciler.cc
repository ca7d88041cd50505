// Reconciler; see reconciler.h.
#include "cluster/reconciler.h"

#include <chrono>
#include <filesystem>

namespace cohort::cluster {
namespace {

constexpr int kProposeTimeoutMs = 3000;
constexpr uint64_t kPublishIntervalMs = 1000;

InstanceHostOptions HostOptionsOf(const ReconcilerOptions& o) {
  InstanceHostOptions h = o.host;
  h.api = o.api;
  h.relay = o.relay;
  return h;
}

}  // namespace

Reconciler::Reconciler(ClusterNode& node, ModelRegistry& registry, const ReconcilerOptions& options, Logger& log)
    : node_(node),
      registry_(registry),
      options_(options),
      log_(log),
      self_(node.id().Hex()),
      placer_(node, options.placer, log),
      host_(node, HostOptionsOf(options), log) {}

Reconciler::~Reconciler() { Stop(); }

void Reconciler::Start() {
  loop_thread_ = std::thread([this] { Loop(); });
  restore_thread_ = std::thread([this] { Restore(); });
}

void Reconciler::Stop() {
  stop_ = true;
  if (startup_thread_.joinable()) startup_thread_.join();
  if (restore_thread_.joinable()) restore_thread_.join();
  if (loop_thread_.joinable()) loop_thread_.join();
  host_.Stop();
}

Result<ModelEntry> Reconciler::ResolveModel(const std::string& path_or_name) {
  COHORT_ASSIGN_OR_RETURN(ModelEntry entry, registry_.Resolve(path_or_name));
  // The file was removed once (`cohort rm`) and is back: nodes must stop deleting it.
  if (Records::Of(node_.Snapshot().state).removed.count(entry.sha256) > 0) {
    (void)node_.ProposeChange(DeleteRemovedModel(entry.sha256), kProposeTimeoutMs);
  }
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_or_name, ec)) return entry;  // a name: nothing held here
  // Proposing through a follower returns before the follower has adopted the new state:
  // publishing from that stale snapshot would leave the file out, and the leader would place
  // the instance on no holder.
  node_.WaitForState([&](const ClusterState& st) { return Records::Of(st).models.count(entry.name) > 0; },
                     kProposeTimeoutMs);
  PublishSelf(node_.Snapshot(), /*now=*/true);
  const bool held = node_.WaitForState(
      [&](const ClusterState& st) {
        const Records records = Records::Of(st);
        auto it = records.nodes.find(self_);
        return it != records.nodes.end() && it->second.files.count(entry.sha256) > 0;
      },
      kProposeTimeoutMs);
  if (!held) log_.Warn("the cluster does not yet know that this node holds {}", entry.name);
  return entry;
}

Result<ModelEntry> Reconciler::ResolveRequestedModel(const std::string& requested) {
  auto file = registry_.RequestedFile(requested);
  if (file.ok()) return ResolveModel(*file);
  if (file.status().code() != StatusCode::kNotFound) return file.status();
  const Records records = Records::Of(node_.Snapshot().state);
  if (auto it = records.models.find(requested); it != records.models.end()) return it->second;
  return file.status();
}

void Reconciler::ProposeAtStart(const std::string& path, const std::string& layout, int nodes) {
  COHORT_CHECK(!startup_thread_.joinable());
  startup_thread_ = std::thread([this, path, layout, nodes] {
    for (int attempt = 0; attempt < 20 && !stop_; ++attempt) {
      auto entry = ResolveModel(path);
      if (entry.ok()) {
        if (node_.Snapshot().state.placements.count(entry->name) != 0) return;
        Instance instance;
        instance.id = entry->name;
        instance.model = entry->name;
        instance.layout = layout;
        instance.nodes = nodes;
        if (node_.ProposeChange(PutInstance(instance)).ok()) return;
      } else {
        log_.Warn("-m {}: {}", path, entry.status().ToString());
      }
      for (int waited = 0; waited < 500 && !stop_; waited += 20) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  });
}

void Reconciler::Loop() {
  while (!stop_) {
    const ClusterSnapshot snap = node_.Snapshot();
    PublishSelf(snap, /*now=*/false);
    placer_.Lead(snap, node_.clock().MonotonicMs());
    host_.Coordinate(snap);
    Persist(snap);
    for (int waited = 0; waited < options_.tick_ms && !stop_; waited += 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void Reconciler::PublishSelf(const ClusterSnapshot& snap, bool publish_now) {
  std::lock_guard<std::mutex> lock(publish_mutex_);
  NodeService want;
  want.id = self_;
  want.name = options_.name;
  want.worker = options_.worker;
  want.api = options_.api;
  want.max_memory_bytes = options_.max_memory_bytes;
  const Records records = Records::Of(snap.state);
  want.files = registry_.HeldFiles(records);
  if (auto have = records.nodes.find(self_); have != records.nodes.end() && have->second == want) return;
  const uint64_t now = node_.clock().MonotonicMs();
  if (!publish_now && now - last_publish_ms_ < kPublishIntervalMs) return;
  last_publish_ms_ = now;
  auto version = node_.ProposeChange(PutNodeService(want), kProposeTimeoutMs);
  if (!version.ok()) log_.Warn("publishing this node's services: {}", version.status().ToString());
}

}  // namespace cohort::cluster
