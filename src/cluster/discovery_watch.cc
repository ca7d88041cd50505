// DiscoveryWatch's bookkeeping and its wording; see discovery_watch.h.
#include "cluster/discovery_watch.h"

#include <fmt/format.h>

namespace cohort::cluster {

DiscoveryWatch::DiscoveryWatch(std::vector<std::string> seeds, uint64_t start_ms, uint64_t grace_ms)
    : seeds_(std::move(seeds)), start_ms_(start_ms), grace_ms_(grace_ms) {}

bool DiscoveryWatch::Due(const std::string& key, uint64_t now_ms) {
  auto it = warned_at_.find(key);
  if (it != warned_at_.end() && now_ms < it->second + kRepeatMs) return false;
  // Garbage from many forged addresses must not grow the map without bound.
  if (it == warned_at_.end() && warned_at_.size() >= kMaxAddresses) return false;
  warned_at_[key] = now_ms;
  return true;
}

std::optional<std::string> DiscoveryWatch::BadMac(const std::string& from, uint64_t now_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Keyed by host: TCP connections come from a new port each time.
  if (!Due("mac " + from.substr(0, from.rfind(':')), now_ms)) return std::nullopt;
  return fmt::format("cluster: rejected packets from {}: they fail authentication, so that node runs with "
                     "a different --secret than this one (or they were altered on the way)",
                     from);
}

void DiscoveryWatch::Heard(const std::string& from) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (heard_.size() < kMaxAddresses) heard_.insert(from);
}

std::vector<std::string> DiscoveryWatch::Tick(uint64_t now_ms, size_t alive_peers,
                                              const std::vector<std::string>& member_addresses) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  if (now_ms < start_ms_ + grace_ms_) return out;
  const uint64_t waited_s = (now_ms - start_ms_) / 1000;
  for (const std::string& seed : seeds_) {
    if (heard_.count(seed) > 0) continue;
    bool advertised = false;
    for (const std::string& a : member_addresses) advertised = advertised || a == seed;
    if (advertised || !Due("peer " + seed, now_ms)) continue;
    out.push_back(fmt::format("cluster: --peers {} has not answered in {} s: is cohort running there with "
                              "this --secret, and is UDP and TCP to that port open?",
                              seed, waited_s));
  }
  if (alive_peers == 0) {
    if (Due("alone", now_ms)) {
      out.push_back(fmt::format("cluster: this node has been alone for {} s: no other node heard (check "
                                "--peers, multicast on this network, the firewall and --secret)",
                                waited_s));
    }
  } else {
    warned_at_.erase("alone");  // a later spell alone is warned afresh
  }
  return out;
}

}  // namespace cohort::cluster
