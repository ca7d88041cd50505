// The shared-memory transport for ranks on one host: each rank owns a segment (shm_open +
// mmap) holding one single-producer ring per peer for the bytes that peer sends it. Waiting
// spins, yields, then sleeps on a futex in the segment; a peer that closed its transport or
// whose process died is noticed within milliseconds (a flag in its segment, its pid).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

struct ShmOptions {
  int rank = 0;
  int n_ranks = 1;
  // Names the group's segments (/dev/shm/cohort-<name>-<rank>); every rank passes the same
  // one, and no two live groups may share it. Letters, digits, '-', '_' and '.' only.
  std::string name;
  size_t ring_bytes = size_t{1} << 20;  // per peer; larger messages stream through it
  std::chrono::milliseconds connect_timeout{10000};
  WaitPolicy wait;

  Status Validate() const;
};

// Creates this rank's segment, maps every peer's (retrying until they exist or the connect
// timeout passes), and unlinks its own name once all peers have mapped it, so nothing is left
// in /dev/shm even if a process dies later.
Result<std::unique_ptr<Transport>> ConnectShmGroup(const ShmOptions& options);

}  // namespace cohort::comm
