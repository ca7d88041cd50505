// ClusterDaemon: the reconcile loop of a cluster node; see cluster_daemon.h.
#include "cluster_daemon.h"

#include <sodium.h>
#include <sys/stat.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "plan/gguf_shape.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace cohort::app {
namespace {

using nlohmann::json;
constexpr int kProposeTimeoutMs = 3000;
constexpr uint64_t kPublishIntervalMs = 1000;
constexpr uint64_t kUnplacedRetryMs = 10000;
constexpr uint64_t kServiceWaitMs = 5000;
constexpr int kDefaultMaxCtx = 4096;

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

// The slowest thing this node measured to a peer, or a LAN default before any measurement.
plan::LinkProfile LinkOf(const cluster::ClusterSnapshot& snap) {
  for (const cluster::MemberView& m : snap.members) {
    if (!m.is_self) continue;
    for (const cluster::LinkMeasurement& l : m.links) {
      if (l.latency_s > 0 && l.bandwidth_Bps > 0) return cluster::ToLinkProfile("measured", l);
    }
  }
  plan::LinkProfile link;
  link.name = "default";
  link.latency_s = 100e-6;
  link.bandwidth_Bps = 1e9 / 8;
  return link;
}

}  // namespace

ClusterDaemon::ClusterDaemon(cluster::ClusterNode& node, const DaemonOptions& options, Logger& log)
    : node_(node), options_(options), log_(log), self_(node.id().Hex()) {}

ClusterDaemon::~ClusterDaemon() { Stop(); }

void ClusterDaemon::Start() {
  reap_thread_ = std::thread([this] { ReapLoop(); });
  loop_thread_ = std::thread([this] { Loop(); });
}

void ClusterDaemon::Stop() {
  stop_ = true;
  if (loop_thread_.joinable()) loop_thread_.join();
  for (auto& [id, slot] : slots_) Retire(std::move(slot));
  slots_.clear();
  {
    std::lock_guard<std::mutex> lock(reap_mutex_);
    reap_stop_ = true;
  }
  reap_cv_.notify_all();
  if (reap_thread_.joinable()) reap_thread_.join();
}

Result<std::string> ClusterDaemon::Sha256Of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return NotFound("no file " + path);
  const std::string stamp = fmt::format("{}:{}", st.st_size, st.st_mtim.tv_sec);
  {
    std::lock_guard<std::mutex> lock(hash_mutex_);
    auto it = hashes_.find(path);
    if (it != hashes_.end() && it->second.first == stamp) return it->second.second;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read " + path);
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  std::vector<char> buffer(size_t{1} << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    crypto_hash_sha256_update(&state, reinterpret_cast<const unsigned char*>(buffer.data()),
                              static_cast<unsigned long long>(in.gcount()));
  }
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, digest);
  const std::string sha = Hex(digest, sizeof(digest));
  std::lock_guard<std::mutex> lock(hash_mutex_);
  hashes_[path] = {stamp, sha};
  return sha;
}

Result<cluster::ModelEntry> ClusterDaemon::ResolveModel(const std::string& path_or_name) {
  const cluster::ClusterState state = node_.Snapshot().state;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_or_name, ec)) {
    auto it = state.models.find(cluster::kModelKeyPrefix + path_or_name);
    if (it == state.models.end()) {
      return NotFound("'" + path_or_name + "' is neither a file on this node nor a model the cluster knows");
    }
    return cluster::ModelEntryFromJson(it->second);
  }
  cluster::ModelEntry entry;
  entry.path = std::filesystem::canonical(path_or_name, ec).string();
  if (ec) return IoError("cannot resolve " + path_or_name);
  entry.name = std::filesystem::path(entry.path).stem().string();
  COHORT_ASSIGN_OR_RETURN(entry.sha256, Sha256Of(entry.path));
  COHORT_ASSIGN_OR_RETURN(plan::GgufModel shape, plan::ReadGgufModel(entry.path));
  entry.shape = shape.shape;
  entry.quant = shape.quant;
  entry.file_bytes = static_cast<int64_t>(shape.file_bytes);
  COHORT_ASSIGN_OR_RETURN(auto file, gguf::File::Open(entry.path));
  COHORT_ASSIGN_OR_RETURN(model::ModelConfig config, model::ModelConfig::FromGguf(*file));
  entry.n_ctx_train = config.n_ctx_train;
  auto it = state.models.find(cluster::kModelKeyPrefix + entry.name);
  if (it != state.models.end()) {
    auto known = cluster::ModelEntryFromJson(it->second);
    if (known.ok() && known->sha256 == entry.sha256) {
      PublishHolding(*known);
      return *known;
    }
    if (known.ok()) {
      return InvalidArgument("a different file (sha256 " + known->sha256.substr(0, 12) +
                             ") is already registered as '" + entry.name + "'");
    }
  }
  COHORT_RETURN_IF_ERROR(node_.ProposeChange({cluster::ChangeKind::kPutModel,
                                              cluster::kModelKeyPrefix + entry.name,
                                              cluster::ModelEntryToJson(entry)},
                                             kProposeTimeoutMs)
                             .status());
  log_.Info("registered model {} ({} bytes, sha256 {})", entry.name, entry.file_bytes, entry.sha256);
  PublishHolding(entry);
  return entry;
}

// Says that this node holds `entry`'s file and waits until the agreed state carries it, so a
// placement proposed next finds a holder. Proposing through a follower returns before the
// follower has adopted the new state: publishing from that stale snapshot would leave the
// file out, and the leader would place the instance on no holder.
void ClusterDaemon::PublishHolding(const cluster::ModelEntry& entry) {
  const std::string model_key = cluster::kModelKeyPrefix + entry.name;
  node_.WaitForState([&](const cluster::ClusterState& st) { return st.models.count(model_key) > 0; },
                     kProposeTimeoutMs);
  PublishSelf(node_.Snapshot(), /*now=*/true);
  const std::string self_key = cluster::kNodeKeyPrefix + self_;
  const bool held = node_.WaitForState(
      [&](const cluster::ClusterState& st) {
        auto it = st.models.find(self_key);
        if (it == st.models.end()) return false;
        auto service = cluster::NodeServiceFromJson(it->second);
        return service.ok() && service->files.count(entry.sha256) > 0;
      },
      kProposeTimeoutMs);
  if (!held) log_.Warn("the cluster does not yet know that this node holds {}", entry.name);
}

void ClusterDaemon::Loop() {
  while (!stop_) {
    const cluster::ClusterSnapshot snap = node_.Snapshot();
    PublishSelf(snap, /*now=*/false);
    Lead(snap);
    Coordinate(snap);
    for (int waited = 0; waited < options_.tick_ms && !stop_; waited += 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

void ClusterDaemon::PublishSelf(const cluster::ClusterSnapshot& snap, bool publish_now) {
  std::lock_guard<std::mutex> lock(publish_mutex_);
  cluster::NodeService want;
  want.id = self_;
  want.name = options_.name;
  want.worker = options_.worker;
  want.api = options_.api;
  want.max_memory_bytes = options_.max_memory_bytes;
  for (const auto& [key, value] : snap.state.models) {
    if (key.rfind(cluster::kModelKeyPrefix, 0) != 0) continue;
    auto entry = cluster::ModelEntryFromJson(value);
    if (!entry.ok()) continue;
    auto sha = Sha256Of(entry->path);
    if (sha.ok() && *sha == entry->sha256) want.files[entry->sha256] = entry->path;
  }
  known_files_->Set(want.files);
  auto it = snap.state.models.find(cluster::kNodeKeyPrefix + self_);
  if (it != snap.state.models.end()) {
    auto have = cluster::NodeServiceFromJson(it->second);
    if (have.ok() && *have == want) return;
  }
  const uint64_t now = NowMs();
  if (!publish_now && now - last_publish_ms_ < kPublishIntervalMs) return;
  last_publish_ms_ = now;
  auto version = node_.ProposeChange(
      {cluster::ChangeKind::kPutModel, cluster::kNodeKeyPrefix + self_, cluster::NodeServiceToJson(want)},
      kProposeTimeoutMs);
  if (!version.ok()) log_.Warn("publishing this node's services: {}", version.status().ToString());
}

ClusterDaemon::LiveSet ClusterDaemon::Live(const cluster::ClusterSnapshot& snap) {
  LiveSet live;
  for (const cluster::MemberView& m : snap.members) {
    if (m.liveness == cluster::Liveness::kDead) continue;
    live.present.insert(m.id.Hex());
    if (m.liveness != cluster::Liveness::kAlive) continue;
    ++live.alive;
    auto it = snap.state.models.find(cluster::kNodeKeyPrefix + m.id.Hex());
    if (it == snap.state.models.end()) continue;
    auto service = cluster::NodeServiceFromJson(it->second);
    if (!service.ok()) continue;
    cluster::PlacementNode n;
    n.service = *service;
    n.profile = cluster::BudgetProfile(m.name, m.profile.memory_total_bytes, m.profile.memory_available_bytes,
                                       m.profile.memory_bandwidth_Bps, m.profile.matmul_flops,
                                       service->max_memory_bytes);
    live.signature += it->second.dump() + ";";
    live.candidates.push_back(std::move(n));
  }
  return live;
}

std::optional<std::string> ClusterDaemon::WhyPlace(const cluster::Instance& inst,
                                                   const std::optional<cluster::RunReport>& run,
                                                   const LiveSet& live, uint64_t now) {
  const std::string& id = inst.id;
  const uint64_t last = last_try_ms_.count(id) ? last_try_ms_[id] : 0;
  switch (inst.status) {
    case cluster::InstanceStatus::kPending: {
      // A node that just joined publishes its services a moment later: wait a little for
      // every alive node to have published before placing.
      if (!pending_since_ms_.count(id)) pending_since_ms_[id] = now;
      if (live.alive > live.candidates.size() && now - pending_since_ms_[id] < kServiceWaitMs) return std::nullopt;
      pending_since_ms_.erase(id);
      return inst.reason;
    }
    case cluster::InstanceStatus::kPlaced:
      for (const cluster::RankPlacement& r : inst.ranks) {
        if (live.present.count(r.node) == 0) return "node " + r.name + " left the cluster";
      }
      if (run.has_value() && run->state == "failed" &&
          now - last >= static_cast<uint64_t>(options_.replace_backoff_ms)) {
        return "the coordinator reported: " + run->error;
      }
      return std::nullopt;
    case cluster::InstanceStatus::kUnplaced:  // again when the live set changes, and now and then
      if (tried_on_[id] != live.signature || now - last >= kUnplacedRetryMs) return std::string("the live nodes changed");
      return std::nullopt;
  }
  return std::nullopt;
}

Status ClusterDaemon::PlaceOn(const cluster::ClusterSnapshot& snap, const LiveSet& live,
                              cluster::Instance* next) {
  auto m = snap.state.models.find(cluster::kModelKeyPrefix + next->model);
  if (m == snap.state.models.end()) return NotFound("model '" + next->model + "' is not registered");
  COHORT_ASSIGN_OR_RETURN(cluster::ModelEntry model, cluster::ModelEntryFromJson(m->second));
  cluster::PlacementInput in;
  in.model = model;
  in.layout = next->layout;
  in.nodes = next->nodes;
  const int model_ctx = std::min(model.n_ctx_train > 0 ? model.n_ctx_train : kDefaultMaxCtx, kDefaultMaxCtx);
  in.context_tokens = options_.context_tokens > 0 ? options_.context_tokens : model_ctx;
  in.sequences = options_.sequences;
  in.candidates = live.candidates;
  in.link = LinkOf(snap);
  return cluster::PlaceInstance(in, next);
}

void ClusterDaemon::Lead(const cluster::ClusterSnapshot& snap) {
  if (snap.leader != snap.self) return;
  const LiveSet live = Live(snap);
  const uint64_t now = NowMs();
  for (const auto& [id, value] : snap.state.placements) {
    auto inst = cluster::InstanceFromJson(value);
    if (!inst.ok()) continue;
    std::optional<cluster::RunReport> run;
    if (auto r = snap.state.models.find(cluster::kRunKeyPrefix + id); r != snap.state.models.end()) {
      auto parsed = cluster::RunReportFromJson(r->second);
      if (parsed.ok() && parsed->epoch == inst->epoch) run = *parsed;
    }
    const std::optional<std::string> reason = WhyPlace(*inst, run, live, now);
    if (!reason.has_value()) continue;
    cluster::Instance next = *inst;
    next.epoch = inst->epoch + 1;
    const Status placed = PlaceOn(snap, live, &next);
    last_try_ms_[id] = now;
    tried_on_[id] = live.signature;
    if (!placed.ok()) {
      next.status = cluster::InstanceStatus::kUnplaced;
      next.reason = placed.message();
      next.ranks.clear();
      next.coordinator.clear();
      // Nothing new to say: do not write the same verdict again.
      if (inst->status == cluster::InstanceStatus::kUnplaced && inst->reason == next.reason) continue;
    } else {
      next.reason = *reason;
    }
    auto version = node_.ProposeChange({cluster::ChangeKind::kPutPlacement, id, cluster::InstanceToJson(next)},
                                       kProposeTimeoutMs);
    if (version.ok()) {
      log_.Info("instance {} epoch {}: {} {}", id, next.epoch, cluster::InstanceStatusName(next.status),
                next.status == cluster::InstanceStatus::kPlaced ? next.plan_label : next.reason);
    }
  }
  // Reports of instances that are gone.
  for (const auto& [key, value] : snap.state.models) {
    if (key.rfind(cluster::kRunKeyPrefix, 0) != 0) continue;
    if (snap.state.placements.count(key.substr(std::strlen(cluster::kRunKeyPrefix))) != 0) continue;
    (void)node_.ProposeChange({cluster::ChangeKind::kDeleteModel, key, {}}, kProposeTimeoutMs);
  }
}

bool ClusterDaemon::Report(const std::string& id, const cluster::RunReport& report) {
  auto version = node_.ProposeChange(
      {cluster::ChangeKind::kPutModel, cluster::kRunKeyPrefix + id, cluster::RunReportToJson(report)},
      kProposeTimeoutMs);
  if (!version.ok()) log_.Warn("instance {}: reporting {}: {}", id, report.state, version.status().ToString());
  return version.ok();
}

void ClusterDaemon::Coordinate(const cluster::ClusterSnapshot& snap) {
  std::set<std::string> mine;
  for (const auto& [id, value] : snap.state.placements) {
    auto inst = cluster::InstanceFromJson(value);
    if (!inst.ok() || inst->status != cluster::InstanceStatus::kPlaced || inst->coordinator != self_) continue;
    mine.insert(id);
    RunnerSlot& slot = slots_[id];
    if (slot.epoch != inst->epoch) {
      Retire(std::move(slot));
      slot = RunnerSlot{};
      slot.epoch = inst->epoch;
      log_.Info("instance {} epoch {}: starting {} on {} rank(s)", id, inst->epoch, inst->plan_label, inst->ranks.size());
      slot.loading = std::async(std::launch::async, [instance = *inst, options = options_.runner, this] {
        return InstanceRunner::Start(instance, options, log_);
      });
    }
    if (slot.loading.valid() && slot.loading.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      auto started = slot.loading.get();
      if (started.ok()) {
        slot.runner = std::move(*started);
      } else {
        slot.load_error = started.status();
        log_.Error("instance {} epoch {}: {}", id, slot.epoch, slot.load_error.ToString());
      }
    }
    if (!slot.reported && !slot.loading.valid()) {
      cluster::RunReport report{slot.epoch, slot.runner != nullptr ? "ready" : "failed",
                                slot.load_error.ok() ? "" : slot.load_error.ToString(),
                                slot.runner != nullptr ? slot.runner->api() : "", self_};
      slot.reported = Report(id, report);
    }
    if (slot.runner != nullptr && slot.reported && !slot.failure_reported) {
      const Status failure = slot.runner->failure();
      if (!failure.ok() && Report(id, {slot.epoch, "failed", failure.ToString(), "", self_})) {
        slot.failure_reported = true;
        RunnerSlot gone;
        gone.runner = std::move(slot.runner);
        Retire(std::move(gone));
      }
    }
  }
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (mine.count(it->first) != 0) {
      ++it;
      continue;
    }
    log_.Info("instance {} epoch {}: stopping here", it->first, it->second.epoch);
    Retire(std::move(it->second));
    it = slots_.erase(it);
  }
}

void ClusterDaemon::Retire(RunnerSlot&& slot) {
  if (!slot.loading.valid() && slot.runner == nullptr) return;
  std::lock_guard<std::mutex> lock(reap_mutex_);
  retired_.push_back(std::move(slot));
  reap_cv_.notify_all();
}

// Stopping a session can wait on a dead peer's timeout, and a loading one on its setup: done
// here so the loop keeps reacting meanwhile.
void ClusterDaemon::ReapLoop() {
  std::unique_lock<std::mutex> lock(reap_mutex_);
  for (;;) {
    reap_cv_.wait(lock, [&] { return reap_stop_ || !retired_.empty(); });
    if (retired_.empty() && reap_stop_) return;
    std::vector<RunnerSlot> batch;
    batch.swap(retired_);
    lock.unlock();
    batch.clear();  // joins loading futures, stops runners
    lock.lock();
  }
}

}  // namespace cohort::app
