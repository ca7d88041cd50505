// InstanceProgress; see instance_progress.h.
#include "cluster/instance_progress.h"

#include <algorithm>

namespace cohort::cluster {

InstanceProgress::InstanceProgress(uint64_t epoch, const Clock& clock)
    : epoch_(epoch), clock_(clock), start_ns_(clock.MonotonicNs()) {}

void InstanceProgress::SetRanks(std::vector<Rank> ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranks_ = std::move(ranks);
  states_.assign(ranks_.size(), State{});
}

double InstanceProgress::Seconds(uint64_t since_ns) const {
  return since_ns == 0 ? 0 : static_cast<double>(clock_.MonotonicNs() - since_ns) / 1e9;
}

void InstanceProgress::Update(int rank, const std::string& phase, uint64_t bytes_done, uint64_t bytes_total) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  State& s = states_[rank];
  const Rank& r = ranks_[rank];
  const uint64_t now = std::max<uint64_t>(1, clock_.MonotonicNs());
  if (phase == "transfer") {
    if (s.transfer_start_ns == 0) s.transfer_start_ns = now;
    s.transfer_done = std::max(s.transfer_done, std::min(bytes_done, r.transfer_bytes));
    if (s.phase == "start") s.phase = "transfer";
  } else if (phase == "load") {
    if (s.load_start_ns == 0) s.load_start_ns = now;
    s.transfer_done = r.transfer_bytes;
    s.load_done = std::max(s.load_done, std::min(bytes_done, r.load_bytes));
    s.phase = bytes_total > 0 && bytes_done >= bytes_total ? "done" : "load";
  }
}

LoadProgress InstanceProgress::Snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LoadProgress p;
  p.epoch = epoch_;
  uint64_t done = 0, total = 0;
  bool transferring = false, loading = false, all_done = !ranks_.empty();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& r = ranks_[i];
    const State& s = states_[i];
    RankProgress rp{r.node, r.name, s.phase, {}};
    const uint64_t rank_done = s.transfer_done + s.load_done, rank_total = r.transfer_bytes + r.load_bytes;
    rp.figures = FiguresOf(rank_done, rank_total, Seconds(s.transfer_start_ns != 0 ? s.transfer_start_ns : s.load_start_ns));
    p.ranks.push_back(std::move(rp));
    done += rank_done;
    total += rank_total;
    transferring |= s.phase == "transfer";
    loading |= s.phase == "load";
    all_done &= s.phase == "done";
  }
  p.phase = transferring ? "transfer" : loading ? "load" : all_done ? "connect" : "start";
  p.figures = FiguresOf(done, total, Seconds(start_ns_));
  return p;
}

}  // namespace cohort::cluster
