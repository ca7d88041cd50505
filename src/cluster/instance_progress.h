// InstanceProgress: the coordinator's running account of how far one instance's loading has
// come. Its totals are fixed once, by SetRanks — per rank, the share's bytes to stream (ranks on
// nodes without the file) and to read from disk — so the overall percent only ever grows;
// the setup's threads (parallel::SessionOptions::progress) move the figures on.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/instance.h"
#include "core/progress.h"

namespace cohort::cluster {

class InstanceProgress {
 public:
  struct Rank {
    std::string node;  // node id hex
    std::string name;
    uint64_t transfer_bytes = 0;  // 0: the node has the file
    uint64_t load_bytes = 0;
  };
  explicit InstanceProgress(uint64_t epoch, const Clock& clock = Clock::Real());
  // The ranks and their totals, once the loader knows them (before any Update); until then
  // the snapshot says "start" with no figures.
  void SetRanks(std::vector<Rank> ranks);

  // Rank `rank` has moved `bytes_done` of `bytes_total` in `phase` ("transfer" or "load").
  // Any thread. A rank that starts loading has no transfer left (its cache held the share).
  void Update(int rank, const std::string& phase, uint64_t bytes_done, uint64_t bytes_total);
  LoadProgress Snapshot() const;

 private:
  struct State {
    std::string phase = "start";
    uint64_t transfer_done = 0, load_done = 0;
    uint64_t transfer_start_ns = 0, load_start_ns = 0;
  };
  double Seconds(uint64_t since_ns) const;

  const uint64_t epoch_;
  const Clock& clock_;
  const uint64_t start_ns_;
  mutable std::mutex mutex_;
  std::vector<Rank> ranks_;    // guarded by mutex_
  std::vector<State> states_;  // guarded by mutex_
};

}  // namespace cohort::cluster
