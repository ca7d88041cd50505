// All-reduce (sum) of float32 over a Communicator. Every rank ends with bitwise-identical
// results: the direct exchange sums contributions in rank order on every rank, the ring
// computes each chunk's sum once and then copies it to everyone.
#pragma once

#include <span>

#include "comm/communicator.h"

namespace cohort::comm {

enum class AllReduceAlgorithm {
  kAuto,    // direct up to CommOptions::direct_bytes_max, ring above
  kDirect,  // every rank sends its whole buffer to every other: one round, (N-1)× the bytes
  kRing,    // reduce-scatter then all-gather around the ring: 2(N-1) rounds, ~2× the bytes
};

enum class WireFormat {
  kF32,  // exact
  kQ8,   // 8-bit blocks (q8_wire.h); always a direct exchange of each rank's quantized input
};

struct AllReduceOptions {
  AllReduceAlgorithm algorithm = AllReduceAlgorithm::kAuto;
  WireFormat wire = WireFormat::kF32;
  std::chrono::milliseconds timeout{0};  // 0 = the communicator's default
};

// What kAuto picks for `bytes` of payload on `n_ranks` ranks.
AllReduceAlgorithm ChooseAllReduceAlgorithm(size_t bytes, int n_ranks, const CommOptions& options);

// Replaces `data` on every rank by the element-wise sum over all ranks. All ranks must call it
// with the same size and options.
Status AllReduceSum(Communicator& comm, std::span<float> data, const AllReduceOptions& options = {});

}  // namespace cohort::comm
