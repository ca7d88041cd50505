// Builds a whole group of N transports inside one process (ranks as threads): over TCP
// loopback or shared memory. Tests of comm and of the layers above use it to run several
// ranks in one test binary.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "comm/tcp_transport.h"
#include "core/status.h"

namespace cohort::comm {

enum class TransportKind { kTcp, kShm, kUcx };
const char* TransportKindName(TransportKind kind);

// Every rank of a loopback TCP group (addresses 127.0.0.1 with ports picked by the kernel).
// `base` supplies every option but rank and addresses.
Result<std::vector<std::unique_ptr<Transport>>> MakeLocalTcpGroup(int n_ranks,
                                                                 const TcpOptions& base = {});

// Every rank of a UCX group bootstrapped over loopback TCP; kUnsupported in builds without UCX.
Result<std::vector<std::unique_ptr<Transport>>> MakeLocalUcxGroup(int n_ranks);

// The transports this build has (tcp and shm always; ucx when built with it).
std::vector<TransportKind> AvailableTransportKinds();

// Every rank of a shared-memory group (see shm_transport.h), under a fresh unique name.
Result<std::vector<std::unique_ptr<Transport>>> MakeLocalShmGroup(int n_ranks);

Result<std::vector<std::unique_ptr<Transport>>> MakeLocalGroup(TransportKind kind, int n_ranks);

// Runs fn(rank) on one thread per rank and returns each rank's Status.
std::vector<Status> RunOnRanks(int n_ranks, const std::function<Status(int rank)>& fn);

}  // namespace cohort::comm
