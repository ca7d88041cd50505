// DiscoveryWatch: the control plane's silent mistakes, said aloud. A wrong cluster secret, a
// --peers address nobody answers on, or a node that never hears anyone all look, from the
// outside, like a healthy one-node cluster; this class decides when each deserves a warning
// (the first time, then at most once a minute while it lasts) and words it. It keeps no
// sockets: ClusterNode reports what it received and asks once per tick.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cohort::cluster {

class DiscoveryWatch {
 public:
  static constexpr uint64_t kRepeatMs = 60000;

  // `seeds`: the --peers addresses ("ip:port"); warnings about silence start `grace_ms`
  // after `start_ms` (monotonic ms).
  DiscoveryWatch(std::vector<std::string> seeds, uint64_t start_ms, uint64_t grace_ms);

  // A packet from `from` failed authentication: the warning to log, if one is due.
  std::optional<std::string> BadMac(const std::string& from, uint64_t now_ms);
  // An authentic packet arrived from `from`.
  void Heard(const std::string& from);
  // The warnings due now: a --peers address never heard from (nor advertised by any member
  // in `member_addresses`), and a node with no live peer (`alive_peers` == 0).
  std::vector<std::string> Tick(uint64_t now_ms, size_t alive_peers, const std::vector<std::string>& member_addresses);

 private:
  bool Due(const std::string& key, uint64_t now_ms);  // mutex_ held

  std::mutex mutex_;
  std::vector<std::string> seeds_;
  uint64_t start_ms_;
  uint64_t grace_ms_;
  std::set<std::string> heard_;                // bounded by kMaxAddresses
  std::map<std::string, uint64_t> warned_at_;  // key -> when last warned; bounded too
  static constexpr size_t kMaxAddresses = 1024;
};

}  // namespace cohort::cluster
