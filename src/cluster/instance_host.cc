// InstanceHost; see instance_host.h.
#include "cluster/instance_host.h"

#include <set>

#include "gguf/gguf.h"
#include "parallel/launch.h"
#include "parallel/shard_bytes.h"

namespace cohort::cluster {
namespace {

constexpr int kProposeTimeoutMs = 3000;
constexpr auto kProgressEvery = std::chrono::seconds(1);

// Each rank's share of `file` (what it reads) and, on nodes without the file, streams.
Result<std::vector<InstanceProgress::Rank>> RankTotals(const Instance& instance, const gguf::File& file,
                                                        const std::vector<bool>& has_file) {
  std::vector<InstanceProgress::Rank> ranks;
  for (size_t r = 0; r < instance.ranks.size(); ++r) {
    COHORT_ASSIGN_OR_RETURN(auto ranges, parallel::ShardByteRanges(file, instance.plan, static_cast<int>(r)));
    const uint64_t bytes = parallel::TotalBytes(ranges);
    const bool local = r == 0 || (r < has_file.size() && has_file[r]);
    ranks.push_back({instance.ranks[r].node, instance.ranks[r].name, local ? 0 : bytes, bytes});
  }
  return ranks;
}

// A whole model's file, read ahead as its one rank's load (a file that does not open is
// left to the loader to report).
Status ReadWhole(const Instance& instance, InstanceProgress& progress) {
  auto file = gguf::File::Open(instance.model_path);
  if (!file.ok()) return Status::Ok();
  const parallel::ByteRange whole{0, (*file)->file_size()};
  progress.SetRanks({{instance.ranks[0].node, instance.ranks[0].name, 0, whole.length}});
  return parallel::TouchRanges((*file)->bytes(), std::span(&whole, 1), [&](uint64_t done, uint64_t total) {
    progress.Update(0, "load", done, total);
  });
}

}  // namespace

Result<OpenedInstance> OpenInstance(const Instance& instance, const InstanceHostOptions& options, Logger& log,
                                    InstanceProgress* progress, std::vector<bool> has_file) {
  if (instance.ranks.empty()) return InvalidArgument("instance " + instance.id + " has no ranks");
  engine::LoadOptions load;
  parallel::DistributedModel* distributed = nullptr;
  if (instance.ranks.size() == 1 && progress != nullptr) {
    COHORT_RETURN_IF_ERROR(ReadWhole(instance, *progress));
  }
  if (instance.ranks.size() > 1) {
    parallel::SessionOptions s;
    s.model_path = instance.model_path;
    s.model_sha256 = instance.model_sha256;  // known: the coordinator does not hash it again
    s.plan = instance.plan;
    for (size_t i = 1; i < instance.ranks.size(); ++i) s.workers.push_back(instance.ranks[i].worker);
    s.worker_threads = std::max(1, options.worker_threads);
    s.setup_timeout = options.setup_timeout;
    s.comm_timeout = options.comm_timeout;
    s.link = options.link;
    s.data_ports = options.data_ports;
    s.key = options.key;
    // Only the header, the tokenizer and rank 0's share: the coordinator does not load the
    // whole model.
    load.make_model = [s, &distributed, &instance, progress, has_file](const gguf::File& file) mutable
        -> Result<std::unique_ptr<model::Model>> {
      if (progress != nullptr) {
        COHORT_ASSIGN_OR_RETURN(auto ranks, RankTotals(instance, file, has_file));
        progress->SetRanks(std::move(ranks));
        s.progress = [progress](int rank, const std::string& phase, uint64_t done, uint64_t total) {
          progress->Update(rank, phase, done, total);
        };
      }
      COHORT_ASSIGN_OR_RETURN(auto model, parallel::DistributedModel::Connect(s, file));
      distributed = model.get();
      return std::unique_ptr<model::Model>(std::move(model));
    };
  }
  COHORT_ASSIGN_OR_RETURN(auto loaded, engine::LoadedModel::Open(instance.model_path, load));
  engine::ServingOptions serving = options.serving;
  serving.name = instance.model;
  serving.scheduler.stop_on_forward_error = distributed != nullptr;
  OpenedInstance opened;
  if (distributed != nullptr) opened.plan = distributed->plan();
  COHORT_ASSIGN_OR_RETURN(opened.serving, engine::ServingInstance::Open(std::move(loaded), serving, log));
  return opened;
}

InstanceHost::InstanceHost(ClusterNode& node, const InstanceHostOptions& options, Logger& log)
    : node_(node), options_(options), log_(log), self_(node.id().Hex()) {
  reap_thread_ = std::thread([this] { ReapLoop(); });
}

InstanceHost::~InstanceHost() { Stop(); }

void InstanceHost::Stop() {
  for (auto& [id, slot] : slots_) Retire(id, std::move(slot));
  slots_.clear();
  {
    std::lock_guard<std::mutex> lock(reap_mutex_);
    if (reap_stop_) return;
    reap_stop_ = true;
  }
  reap_cv_.notify_all();
  if (reap_thread_.joinable()) reap_thread_.join();
}

std::shared_ptr<engine::ServingInstance> InstanceHost::Find(const std::string& id, uint64_t epoch) const {
  std::lock_guard<std::mutex> lock(serving_mutex_);
  auto it = serving_.find(id);
  if (it == serving_.end() || it->second.first != epoch) return nullptr;
  return it->second.second;
}

void InstanceHost::Publish(const std::string& id, const Slot& slot) {
  std::lock_guard<std::mutex> lock(serving_mutex_);
  if (slot.serving != nullptr && !slot.failure_reported) {
    serving_[id] = {slot.epoch, slot.serving};
  } else {
    serving_.erase(id);
  }
}

bool InstanceHost::Report(const std::string& id, const RunReport& report) {
  auto version = node_.ProposeChange(PutRunReport(id, report), kProposeTimeoutMs);
  if (!version.ok()) {
    log_.Warn("instance {}: reporting {}: {}", id, RunStateName(report.state), version.status().ToString());
  }
  return version.ok();
}

void InstanceHost::Coordinate(const ClusterSnapshot& snap) {
  std::set<std::string> mine;
  for (const auto& [id, instance] : Records::Of(snap.state).instances) {
    const Instance* inst = &instance;
    if (inst->status != InstanceStatus::kPlaced || inst->coordinator != self_) continue;
    mine.insert(id);
    Slot& slot = slots_[id];
    if (slot.epoch != inst->epoch) {
      Retire(id, std::move(slot));
      slot = Slot{};
      slot.epoch = inst->epoch;
      log_.Info("instance {} epoch {}: starting {} on {} rank(s)", id, inst->epoch, inst->plan_label,
                inst->ranks.size());
      const Records records = Records::Of(snap.state);
      std::vector<bool> has_file;
      for (const RankPlacement& r : inst->ranks) {
        auto node = records.nodes.find(r.node);
        has_file.push_back(node != records.nodes.end() && node->second.files.count(inst->model_sha256) > 0);
      }
      slot.progress = std::make_shared<InstanceProgress>(inst->epoch);
      slot.loading = std::async(std::launch::async, [instance = *inst, options = options_, this,
                                                     progress = slot.progress, has_file] {
        return OpenInstance(instance, options, log_, progress.get(), has_file);
      });
    }
    Watch(id, slot);
  }
  for (auto it = slots_.begin(); it != slots_.end();) {
    if (mine.count(it->first) != 0) {
      ++it;
      continue;
    }
    log_.Info("instance {} epoch {}: stopping here", it->first, it->second.epoch);
    Retire(it->first, std::move(it->second));
    it = slots_.erase(it);
  }
}

// Takes a finished load, reports its outcome once, and reports (and retires) an instance
// whose model stopped running.
void InstanceHost::Watch(const std::string& id, Slot& slot) {
  if (slot.loading.valid()) ReportProgress(id, slot);
  if (slot.loading.valid() && slot.loading.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    auto started = slot.loading.get();
    if (started.ok()) {
      slot.serving = std::move(started->serving);
      slot.plan = std::move(started->plan);
      Publish(id, slot);
    } else {
      slot.load_error = started.status();
      log_.Error("instance {} epoch {}: {}", id, slot.epoch, slot.load_error.ToString());
    }
  }
  if (!slot.reported && !slot.loading.valid()) {
    RunReport report;
    report.epoch = slot.epoch;
    report.state = slot.serving != nullptr ? RunState::kReady : RunState::kFailed;
    report.error = slot.load_error.ok() ? "" : slot.load_error.ToString();
    report.api = slot.serving != nullptr ? options_.api : "";
    report.relay = slot.serving != nullptr ? options_.relay : "";
    report.coordinator = self_;
    report.plan = slot.plan;
    slot.reported = Report(id, report);
    if (slot.reported && slot.progress != nullptr) {
      const LoadProgress last = slot.progress->Snapshot();
      log_.Record("progress", fmt::format("instance {} epoch {}: {}, {}", id, slot.epoch, RunStateName(report.state),
                                          FormatProgress(last.figures)));
      slot.progress.reset();
      (void)node_.ProposeChange(DeleteLoadProgress(id), kProposeTimeoutMs);  // the view shows it only while loading
    }
  }
  if (slot.serving != nullptr && slot.reported && !slot.failure_reported) {
    const Status failure = slot.serving->failure();
    RunReport report;
    report.epoch = slot.epoch;
    report.state = RunState::kFailed;
    report.error = failure.ToString();
    report.coordinator = self_;
    if (!failure.ok() && Report(id, report)) {
      slot.failure_reported = true;
      Publish(id, slot);
      Slot gone;
      gone.serving = std::move(slot.serving);
      Retire(id, std::move(gone));
    }
  }
}

void InstanceHost::ReportProgress(const std::string& id, Slot& slot) {
  if (slot.progress == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - slot.progress_reported < kProgressEvery) return;
  const LoadProgress p = slot.progress->Snapshot();
  if (p.figures.bytes_done == slot.progress_bytes_reported && p.phase == slot.progress_phase_reported) return;
  slot.progress_reported = now;
  slot.progress_bytes_reported = p.figures.bytes_done;
  slot.progress_phase_reported = p.phase;
  std::string per_node;
  for (const RankProgress& r : p.ranks) {
    per_node += fmt::format("{}{} {} {:.0f}%", per_node.empty() ? "" : ", ", r.name, r.phase, r.figures.percent());
  }
  // One plain line a second: the journal's progress (the dashboard and `cohort load` draw bars).
  log_.Record("progress", fmt::format("instance {} epoch {}: {} {}{}", id, slot.epoch, p.phase, FormatProgress(p.figures),
                                      per_node.empty() ? "" : " (" + per_node + ")"));
  auto version = node_.ProposeChange(PutLoadProgress(id, p), kProposeTimeoutMs);
  if (!version.ok()) log_.Warn("instance {}: reporting progress: {}", id, version.status().ToString());
}

void InstanceHost::Retire(const std::string& id, Slot&& slot) {
  {
    std::lock_guard<std::mutex> lock(serving_mutex_);
    auto it = serving_.find(id);
    if (it != serving_.end() && it->second.first == slot.epoch) serving_.erase(it);
  }
  if (!slot.loading.valid() && slot.serving == nullptr) return;
  std::lock_guard<std::mutex> lock(reap_mutex_);
  retired_.push_back(std::move(slot));
  reap_cv_.notify_all();
}

// Stopping a session can wait on a dead peer's timeout, and a loading one on its setup: done
// here so the loop keeps reacting meanwhile.
void InstanceHost::ReapLoop() {
  std::unique_lock<std::mutex> lock(reap_mutex_);
  for (;;) {
    reap_cv_.wait(lock, [&] { return reap_stop_ || !retired_.empty(); });
    if (retired_.empty() && reap_stop_) return;
    std::vector<Slot> batch;
    batch.swap(retired_);
    lock.unlock();
    batch.clear();  // joins loading futures, stops the instances no request holds any more
    lock.lock();
  }
}

}  // namespace cohort::cluster
