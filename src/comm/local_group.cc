// In-process groups of ranks (see local_group.h).
#include "comm/local_group.h"

#include <unistd.h>

#include <atomic>
#include <thread>

#include <fmt/format.h>

#include "comm/shm_transport.h"
#ifdef COHORT_HAVE_UCX
#include "comm/ucx_transport.h"
#endif

namespace cohort::comm {

const char* TransportKindName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kTcp: return "tcp";
    case TransportKind::kShm: return "shm";
    case TransportKind::kUcx: return "ucx";
  }
  return "?";
}

std::vector<Status> RunOnRanks(int n_ranks, const std::function<Status(int rank)>& fn) {
  std::vector<Status> statuses(n_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) {
    threads.emplace_back([&, r] { statuses[r] = fn(r); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

namespace {
// Names groups built in this process apart from each other and from other processes.
uint64_t FreshGroupId() {
  static std::atomic<uint64_t> counter{0};
  return (static_cast<uint64_t>(getpid()) << 32) ^ (++counter * 0x9e3779b97f4a7c15ull);
}

Result<std::vector<std::unique_ptr<Transport>>> Collect(
    std::vector<Result<std::unique_ptr<Transport>>>& results) {
  std::vector<std::unique_ptr<Transport>> out;
  for (auto& result : results) {
    if (!result.ok()) return result.status();
    out.push_back(std::move(result).value());
  }
  return out;
}
}  // namespace

Result<std::vector<std::unique_ptr<Transport>>> MakeLocalTcpGroup(int n_ranks,
                                                                 const TcpOptions& base) {
  std::vector<std::unique_ptr<TcpListener>> listeners;
  std::vector<std::string> addresses;
  for (int r = 0; r < n_ranks; ++r) {
    COHORT_ASSIGN_OR_RETURN(auto listener, TcpListener::Bind("127.0.0.1:0"));
    addresses.push_back(listener->address());
    listeners.push_back(std::move(listener));
  }
  const uint64_t group_id = FreshGroupId();
  std::vector<Result<std::unique_ptr<Transport>>> results;
  for (int r = 0; r < n_ranks; ++r) results.emplace_back(Internal("not run"));
  RunOnRanks(n_ranks, [&](int r) {
    TcpOptions options = base;
    options.rank = r;
    options.addresses = addresses;
    options.group_id = group_id;
    results[r] = ConnectTcpGroup(options, std::move(listeners[r]));
    return Status::Ok();
  });
  return Collect(results);
}

Result<std::vector<std::unique_ptr<Transport>>> MakeLocalShmGroup(int n_ranks) {
  const std::string name = fmt::format("local-{:x}", FreshGroupId());
  std::vector<Result<std::unique_ptr<Transport>>> results;
  for (int r = 0; r < n_ranks; ++r) results.emplace_back(Internal("not run"));
  RunOnRanks(n_ranks, [&](int r) {
    ShmOptions options;
    options.rank = r;
    options.n_ranks = n_ranks;
    options.name = name;
    results[r] = ConnectShmGroup(options);
    return Status::Ok();
  });
  return Collect(results);
}

Result<std::vector<std::unique_ptr<Transport>>> MakeLocalUcxGroup(int n_ranks) {
#ifdef COHORT_HAVE_UCX
  std::vector<std::unique_ptr<TcpListener>> listeners;
  std::vector<std::string> addresses;
  for (int r = 0; r < n_ranks; ++r) {
    COHORT_ASSIGN_OR_RETURN(auto listener, TcpListener::Bind("127.0.0.1:0"));
    addresses.push_back(listener->address());
    listeners.push_back(std::move(listener));
  }
  const uint64_t group_id = FreshGroupId();
  std::vector<Result<std::unique_ptr<Transport>>> results;
  for (int r = 0; r < n_ranks; ++r) results.emplace_back(Internal("not run"));
  RunOnRanks(n_ranks, [&](int r) {
    UcxOptions options;
    options.bootstrap.rank = r;
    options.bootstrap.addresses = addresses;
    options.bootstrap.group_id = group_id;
    results[r] = ConnectUcxGroup(options, std::move(listeners[r]));
    return Status::Ok();
  });
  return Collect(results);
#else
  (void)n_ranks;
  return Unsupported("this build has no UCX transport (install libucx-dev and reconfigure)");
#endif
}

std::vector<TransportKind> AvailableTransportKinds() {
#ifdef COHORT_HAVE_UCX
  return {TransportKind::kTcp, TransportKind::kShm, TransportKind::kUcx};
#else
  return {TransportKind::kTcp, TransportKind::kShm};
#endif
}

Result<std::vector<std::unique_ptr<Transport>>> MakeLocalGroup(TransportKind kind, int n_ranks) {
  switch (kind) {
    case TransportKind::kTcp: return MakeLocalTcpGroup(n_ranks);
    case TransportKind::kShm: return MakeLocalShmGroup(n_ranks);
    case TransportKind::kUcx: return MakeLocalUcxGroup(n_ranks);
  }
  return InvalidArgument("unknown transport kind");
}

}  // namespace cohort::comm
