// ApiKeys; see api_keys.h.
#include "server/api_keys.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

namespace cohort::server {
namespace {

constexpr size_t kKeysMax = 10000;
constexpr size_t kKeyBytesMin = 8;
constexpr size_t kKeyBytesMax = 512;
constexpr size_t kBucketsMax = 100000;  // distinct callers remembered (others are reset)

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-' || c == '@';
  });
}

bool ValidKey(const std::string& key) {
  if (key.size() < kKeyBytesMin || key.size() > kKeyBytesMax) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

// Compares without an early exit: the time depends on the key's length only.
bool SameKey(const std::string& given, const std::string& key) {
  unsigned diff = given.size() != key.size() ? 1u : 0u;
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0;
}

}  // namespace

Result<std::vector<ApiKeys::Key>> ApiKeys::ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("--api-key-file: cannot read " + path);
  std::vector<Key> keys;
  std::set<std::string> names, values;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream words(line);
    Key k;
    std::string extra;
    if (!(words >> k.name) || k.name[0] == '#') continue;
    // Errors name the line, never its key.
    if (!(words >> k.key) || (words >> extra)) {
      return InvalidArgument(fmt::format("--api-key-file line {}: want NAME KEY", n));
    }
    if (!ValidName(k.name)) {
      return InvalidArgument(fmt::format("--api-key-file line {}: a name is 1..64 of A-Z a-z 0-9 . _ - @", n));
    }
    if (!ValidKey(k.key)) {
      return InvalidArgument(fmt::format("--api-key-file line {}: a key is {}..{} printable characters", n,
                                         kKeyBytesMin, kKeyBytesMax));
    }
    if (!names.insert(k.name).second) return InvalidArgument(fmt::format("--api-key-file line {}: name again", n));
    if (!values.insert(k.key).second) return InvalidArgument(fmt::format("--api-key-file line {}: key again", n));
    if (keys.size() >= kKeysMax) return OutOfRange(fmt::format("--api-key-file: more than {} keys", kKeysMax));
    keys.push_back(std::move(k));
  }
  return keys;
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::Load(const std::vector<std::string>& flag_keys, const std::string& file,
                                               RateLimit limit) {
  if (limit.per_second < 0 || limit.burst < 0) return InvalidArgument("rate limits must be >= 0");
  for (const std::string& k : flag_keys) {
    if (k.empty()) return InvalidArgument("an API key must not be empty");
  }
  std::unique_ptr<ApiKeys> keys(new ApiKeys());
  keys->flag_keys_ = flag_keys;
  keys->file_ = file;
  keys->limit_ = limit;
  if (keys->limit_.per_second > 0 && keys->limit_.burst == 0) keys->limit_.burst = std::max(1.0, limit.per_second);
  COHORT_RETURN_IF_ERROR(keys->Reload());
  return keys;
}

Status ApiKeys::Reload() {
  std::vector<Key> keys;
  for (size_t i = 0; i < flag_keys_.size(); ++i) keys.push_back({fmt::format("key{}", i + 1), flag_keys_[i]});
  if (!file_.empty()) {
    COHORT_ASSIGN_OR_RETURN(std::vector<Key> from_file, ReadFile(file_));
    keys.insert(keys.end(), from_file.begin(), from_file.end());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  keys_ = std::move(keys);
  return Status::Ok();
}

bool ApiKeys::open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_.empty();
}

size_t ApiKeys::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return keys_.size();
}

std::optional<std::string> ApiKeys::Match(const std::string& authorization) const {
  const std::string prefix = "Bearer ";
  if (authorization.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::string given = authorization.substr(prefix.size());
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string* name = nullptr;
  for (const Key& k : keys_) {
    if (SameKey(given, k.key)) name = &k.name;  // no break: every key is compared
  }
  if (name == nullptr) return std::nullopt;
  return *name;
}

bool ApiKeys::Admit(const std::string& who, double* retry_after_s) {
  if (limit_.per_second <= 0) return true;
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (buckets_.size() >= kBucketsMax && buckets_.count(who) == 0) buckets_.clear();
  auto [it, fresh] = buckets_.try_emplace(who, Bucket{limit_.burst, now});
  Bucket& b = it->second;
  if (!fresh) {
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    b.tokens = std::min(limit_.burst, b.tokens + elapsed * limit_.per_second);
    b.at = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return true;
  }
  if (retry_after_s != nullptr) *retry_after_s = (1 - b.tokens) / limit_.per_second;
  return false;
}

}  // namespace cohort::server
