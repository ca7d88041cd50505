// The Reconciler's memory across restarts and its part in `cohort rm`: registering the models
// directory at start, proposing the remembered instances, keeping instances.json current,
// and deleting this node's copies of removed models. See reconciler.h.
#include <chrono>
#include <map>
#include <filesystem>
#include <thread>

#include "cluster/reconciler.h"

namespace cohort::cluster {
namespace {

namespace fs = std::filesystem;
constexpr int kRestoreTimeoutMs = 3000;
// The stored instances must have stayed in the agreed state this long before the restore
// ends: long enough for nodes that started alone to have met and merged their states.
constexpr uint64_t kSettledMs = 10000;
// How long a node that hears nobody waits before it restores alone.
constexpr uint64_t kAloneMs = 10000;

std::string StorePath(const std::string& state_dir) { return state_dir + "/instances.json"; }

std::vector<std::string> GgufFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".gguf") out.push_back(e.path().string());
    if (out.size() >= 4096) break;
  }
  return out;
}

uint64_t NowMs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

bool RemovedByName(const Records& records, const std::string& model) {
  for (const auto& [sha, name] : records.removed) {
    if (name == model) return true;
  }
  return false;
}

}  // namespace

void Reconciler::WaitForPeers() {
  // A node restarting alone into a running cluster must not propose what it remembers into
  // a state of its own: that state could win the merge and drop the running placements.
  // So it waits until it follows an agreed leader with a peer alive, or until a lone node
  // has waited long enough to be alone (a one-node cluster).
  const uint64_t deadline = NowMs() + kAloneMs;
  while (!stop_ && NowMs() < deadline) {
    const ClusterSnapshot snap = node_.Snapshot();
    size_t peers = 0;
    for (const MemberView& m : snap.members) peers += !m.is_self && m.liveness == Liveness::kAlive ? 1 : 0;
    if (peers > 0 && !snap.state.leader.IsZero() && snap.state.leader == snap.leader) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Reconciler::Restore() {
  WaitForPeers();
  for (const std::string& path : GgufFilesIn(options_.models_dir)) {
    if (stop_) return;
    if (auto entry = ResolveModel(path); !entry.ok()) log_.Warn("models dir: {}: {}", path, entry.status().ToString());
  }
  std::vector<StoredInstance> stored;
  if (!options_.state_dir.empty()) {
    auto loaded = LoadInstances(StorePath(options_.state_dir));
    if (loaded.ok()) {
      stored = std::move(*loaded);
    } else {
      log_.Warn("{} (the instances it lists are not brought back)", loaded.status().ToString());
    }
  }
  if (!stored.empty()) log_.Info("bringing back {} instance(s) from {}", stored.size(), options_.state_dir);
  const uint64_t start = NowMs();
  uint64_t all_present_since = 0;
  std::set<std::string> registered;
  // The term of the last state each instance was seen in: gone under that same term, someone
  // deleted it (`cohort unload`), and it stays gone; gone under a later term that never held
  // it, a merge with a node that led alone dropped it, and it is proposed again. (The first
  // term it was seen in would not do: an election after it, then an unload, reads as a merge.)
  std::map<std::string, uint64_t> seen_in_term;
  while (!stop_ && !stored.empty() && NowMs() < start + static_cast<uint64_t>(options_.restore_window_ms)) {
    const ClusterState state = node_.Snapshot().state;
    const Records records = Records::Of(state);
    bool all_present = true;
    for (auto it = stored.begin(); it != stored.end();) {
      auto seen = seen_in_term.find(it->id);
      if (records.instances.count(it->id) > 0) {
        seen_in_term[it->id] = state.term;
        ++it;
        continue;
      }
      if (seen != seen_in_term.end() && seen->second == state.term) {
        it = stored.erase(it);
        continue;
      }
      // Its model was removed (`cohort rm`) and not registered again: registering this node's
      // copy would undo the removal.
      if (records.models.count(it->model) == 0 && RemovedByName(records, it->model)) {
        it = stored.erase(it);
        continue;
      }
      const StoredInstance& s = *it++;
      all_present = false;
      // This node's copy of the model registers it again; otherwise a node that holds it will.
      if (records.models.count(s.model) == 0 && !s.model_path.empty() && registered.insert(s.model_path).second) {
        if (auto e = ResolveModel(s.model_path); !e.ok()) log_.Warn("instance {}: {}", s.id, e.status().ToString());
      }
      if (Records::Of(node_.Snapshot().state).models.count(s.model) > 0) {
        (void)node_.ProposeChange(PutInstance(PendingInstanceOf(s)), kRestoreTimeoutMs);
      }
    }
    if (!all_present) all_present_since = 0;
    if (all_present && all_present_since == 0) all_present_since = NowMs();
    if (all_present && NowMs() >= all_present_since + kSettledMs) break;
    for (int waited = 0; waited < 500 && !stop_; waited += 20) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  restored_ = true;
}

void Reconciler::Persist(const ClusterSnapshot& snap) {
  const Records records = Records::Of(snap.state);
  DeleteRemoved(records);
  // Before the restore ends the state may not yet hold what the file remembers: writing it
  // then would forget the instances the restore is bringing back.
  if (options_.state_dir.empty() || !restored_) return;
  std::vector<StoredInstance> want = StoredInstancesOf(records, registry_.KnownFiles());
  if (want == saved_) return;
  if (Status s = SaveInstances(StorePath(options_.state_dir), want); !s.ok()) {
    log_.Warn("remembering instances: {}", s.ToString());
    return;
  }
  saved_ = std::move(want);
}

void Reconciler::DeleteRemoved(const Records& records) {
  for (const auto& [sha, name] : records.removed) {
    if (removed_done_.count(sha) > 0) continue;
    bool registered_again = false;
    for (const auto& [model, entry] : records.models) registered_again = registered_again || entry.sha256 == sha;
    if (registered_again) continue;
    removed_done_.insert(sha);
    std::error_code ec;
    // Only files this node keeps for the cluster (its models and cache directories) are
    // deleted; a file registered from elsewhere on the disk is the user's.
    for (const std::string& path : GgufFilesIn(options_.models_dir)) {
      auto digest = registry_.Sha256Of(path);
      if (digest.ok() && *digest == sha && fs::remove(path, ec)) log_.Warn("removed model {}: deleted {}", name, path);
    }
    for (const std::string& path : GgufFilesIn(options_.cache_dir)) {
      if (fs::path(path).filename().string().rfind(sha + "-", 0) == 0 && fs::remove(path, ec)) {
        log_.Warn("removed model {}: deleted the cached share {}", name, path);
      }
    }
  }
}

}  // namespace cohort::cluster
