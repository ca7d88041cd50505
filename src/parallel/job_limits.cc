// Job validation and per-coordinator slots; see job_limits.h.
#include "parallel/job_limits.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace cohort::parallel {
namespace {

using nlohmann::json;

// The field `name` of `job` as an integer in [lo, hi].
Status CheckInt(const json& job, const char* name, int64_t lo, int64_t hi) {
  auto it = job.find(name);
  if (it == job.end()) return InvalidArgument(fmt::format("job field '{}' is missing", name));
  if (!it->is_number_integer()) return InvalidArgument(fmt::format("job field '{}' must be an integer", name));
  // Unsigned values past INT64_MAX read as negative here, and fail the range.
  const int64_t v = it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                        ? -1
                        : it->get<int64_t>();
  if (v < lo || v > hi) return OutOfRange(fmt::format("job field '{}' = {} is outside [{}, {}]", name, v, lo, hi));
  return Status::Ok();
}

Status CheckString(const json& job, const char* name, size_t max_bytes) {
  auto it = job.find(name);
  if (it == job.end()) return InvalidArgument(fmt::format("job field '{}' is missing", name));
  if (!it->is_string()) return InvalidArgument(fmt::format("job field '{}' must be a string", name));
  if (it->get_ref<const std::string&>().size() > max_bytes) {
    return OutOfRange(fmt::format("job field '{}' is longer than {} bytes", name, max_bytes));
  }
  return Status::Ok();
}

bool IsShmName(const std::string& s) {
  if (s.size() < 5 || s.size() > 64 || s.rfind("job-", 0) != 0) return false;
  return std::all_of(s.begin() + 4, s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

}  // namespace

Status ValidateJob(const json& job, const JobLimits& limits) {
  if (!job.is_object()) return InvalidArgument("the job is not a JSON object");
  COHORT_RETURN_IF_ERROR(CheckInt(job, "n_ranks", 2, limits.n_ranks_max));
  const int64_t n_ranks = job["n_ranks"].get<int64_t>();
  COHORT_RETURN_IF_ERROR(CheckInt(job, "rank", 1, n_ranks - 1));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "threads", 1, limits.threads_max));
  COHORT_RETURN_IF_ERROR(CheckString(job, "model", limits.model_path_bytes_max));
  COHORT_RETURN_IF_ERROR(CheckString(job, "model_sha256", 64));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "model_bytes", 1, int64_t{1} << 42));
  COHORT_RETURN_IF_ERROR(CheckString(job, "plan", limits.plan_bytes_max));
  COHORT_RETURN_IF_ERROR(CheckString(job, "transport", 8));
  const std::string& transport = job["transport"].get_ref<const std::string&>();
  if (transport != "tcp" && transport != "shm" && transport != "ucx") {
    return InvalidArgument("job field 'transport' must be tcp, shm or ucx");
  }
  COHORT_RETURN_IF_ERROR(CheckString(job, "shm_name", 64));
  if (!IsShmName(job["shm_name"].get<std::string>())) {
    return InvalidArgument("job field 'shm_name' must be job-<hex>");
  }
  // Any 64-bit value (nlohmann reads small ones as unsigned too).
  const auto group = job.find("group_id");
  if (group == job.end() || !group->is_number_integer() ||
      (!group->is_number_unsigned() && group->get<int64_t>() < 0)) {
    return InvalidArgument("job field 'group_id' must be an unsigned integer");
  }
  COHORT_RETURN_IF_ERROR(CheckInt(job, "link_latency_us", 0, 10'000'000));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "link_bandwidth", 0, int64_t{1} << 50));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "setup_timeout_ms", 100, limits.timeout_ms_max));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "comm_timeout_ms", 100, limits.timeout_ms_max));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "idle_timeout_ms", 100, limits.idle_timeout_ms_max));
  COHORT_RETURN_IF_ERROR(CheckInt(job, "transfer_timeout_ms", 100, limits.transfer_timeout_ms_max));
  return Status::Ok();
}

std::string HostOfAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return "";
  return address.substr(0, colon);
}

Status ValidateAddresses(const std::vector<std::string>& addresses, int rank, int n_ranks,
                         const std::string& coordinator_host, const std::string& own_address,
                         const std::function<bool(const std::string& host)>& allowed_host) {
  if (static_cast<int>(addresses.size()) != n_ranks) {
    return InvalidArgument(fmt::format("the go message has {} addresses for {} ranks", addresses.size(), n_ranks));
  }
  if (own_address.empty()) return Status::Ok();  // shm: no addresses are used
  for (int r = 0; r < n_ranks; ++r) {
    const std::string& a = addresses[static_cast<size_t>(r)];
    const std::string host = HostOfAddress(a);
    if (a.size() > 256 || host.empty()) return InvalidArgument(fmt::format("rank {}'s address is malformed", r));
    if (r == 0 && host != coordinator_host) {
      return InvalidArgument(fmt::format("rank 0's data address is not on the coordinator's host {}", coordinator_host));
    }
    if (r == rank && a != own_address) return InvalidArgument("the go message moved this rank's own address");
    if (allowed_host && !allowed_host(host)) {
      return InvalidArgument(fmt::format("rank {}'s address is not a cluster member's", r));
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<PeerSlots::Ticket>> PeerSlots::Enter(const std::string& host) {
  std::lock_guard<std::mutex> lock(mutex_);
  int& held = held_[host];
  if (held >= per_peer_max_) {
    if (held == 0) held_.erase(host);
    return ResourceExhausted(fmt::format("{} already holds {} of this worker's jobs (the most one coordinator may)",
                                         host, per_peer_max_));
  }
  ++held;
  return std::make_unique<Ticket>(this, host);
}

int PeerSlots::held(const std::string& host) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(host);
  return it == held_.end() ? 0 : it->second;
}

void PeerSlots::Leave(const std::string& host) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(host);
  if (it != held_.end() && --it->second <= 0) held_.erase(it);
}

}  // namespace cohort::parallel
