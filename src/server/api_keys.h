// ApiKeys: the keys the HTTP front accepts, each with a name, and a rate limit per key. Keys
// come from --api-key (named key1, key2, ...) and from --api-key-file, one "NAME KEY" per line
// ('#' comments and blank lines allowed), which Reload() reads again (on SIGHUP) so keys can
// be added and revoked without a restart; a file that does not parse leaves the keys as they
// were. Logs and errors name a key, never show it. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::server {

struct RateLimit {
  double per_second = 0;  // requests per second per key (0: no limit)
  double burst = 0;       // requests a key may make at once (0: max(1, per_second))
};

class ApiKeys {
 public:
  // `flag_keys` are named key1.. in order; `file` may be "".
  static Result<std::unique_ptr<ApiKeys>> Load(const std::vector<std::string>& flag_keys, const std::string& file,
                                               RateLimit limit);

  // Reads the key file again; on an error the keys stay as they were.
  Status Reload();
  // True when no key is set: every request is let in (named "anonymous").
  bool open() const;
  size_t size() const;
  // The name of the key an "Authorization: Bearer KEY" header carries, or nullopt. Every key is
  // compared in constant time, so the time says nothing about which one nearly matched.
  std::optional<std::string> Match(const std::string& authorization) const;
  // Takes one request from `who`'s allowance; false (and the seconds until the next one in
  // *retry_after_s) when it is spent.
  bool Admit(const std::string& who, double* retry_after_s);

 private:
  struct Key {
    std::string name, key;
  };
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point at;
  };
  ApiKeys() = default;
  static Result<std::vector<Key>> ReadFile(const std::string& path);

  mutable std::mutex mutex_;
  std::vector<std::string> flag_keys_;
  std::string file_;
  std::vector<Key> keys_;
  RateLimit limit_;
  std::map<std::string, Bucket> buckets_;
};

}  // namespace cohort::server
