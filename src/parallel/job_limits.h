// What a worker accepts from a coordinator, checked before the job touches anything: a job is
// hostile input even when it comes from an authenticated peer (a compromised node, a bug).
// ValidateJob bounds every field of the job message (threads, timeouts, sizes, ranks, names);
// ValidateAddresses checks the data addresses the coordinator tells the worker to connect to
// (only the coordinator itself and, where the worker knows the cluster, its members, so a
// job cannot make the worker connect anywhere); PeerSlots limits how many jobs one
// coordinator holds at once, so one peer cannot take every slot.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::parallel {

struct JobLimits {
  // A coordinator may have many more cores than its workers (their -t defaults to its own),
  // so the bound is absolute, not this machine's core count.
  int threads_max = 1024;
  int n_ranks_max = 256;
  int64_t timeout_ms_max = 3600000;         // setup and collective bounds: an hour
  int64_t idle_timeout_ms_max = 120000;     // a silent coordinator is left after at most 2 min
  int64_t transfer_timeout_ms_max = 6 * 3600000;
  size_t model_path_bytes_max = 4096;
  size_t plan_bytes_max = 4 << 20;
};

// Every field of a job (session.cc's MakeJob) present, of its type and inside `limits`; the
// error names the field. Says nothing about the model file or the plan's fit to it.
Status ValidateJob(const nlohmann::json& job, const JobLimits& limits);

// The "addresses" of a job's go message for a worker of `rank` in a job of `n_ranks`: one
// "host:port" per rank; rank 0's host is `coordinator_host` (the peer of the control
// connection), this rank's is `own_address` (the listener it reported, "" for shm), and, when
// `allowed_host` is set, every host passes it (the cluster's members).
Status ValidateAddresses(const std::vector<std::string>& addresses, int rank, int n_ranks,
                         const std::string& coordinator_host, const std::string& own_address,
                         const std::function<bool(const std::string& host)>& allowed_host);

// The host part of "host:port" ("" when there is no port).
std::string HostOfAddress(const std::string& address);

// Jobs held per coordinator host. A Ticket holds one of `per_peer_max` slots of its host for
// as long as it lives.
class PeerSlots {
 public:
  explicit PeerSlots(int per_peer_max) : per_peer_max_(per_peer_max) {}

  class Ticket {
   public:
    Ticket(PeerSlots* slots, std::string host) : slots_(slots), host_(std::move(host)) {}
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    ~Ticket() { slots_->Leave(host_); }

   private:
    PeerSlots* slots_;
    std::string host_;
  };

  // A ticket for one more job of `host`, or kResourceExhausted when it holds its share.
  Result<std::unique_ptr<Ticket>> Enter(const std::string& host);
  int held(const std::string& host) const;

 private:
  void Leave(const std::string& host);

  const int per_peer_max_;
  mutable std::mutex mutex_;
  std::map<std::string, int> held_;
};

}  // namespace cohort::parallel
