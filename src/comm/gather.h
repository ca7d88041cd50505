// Gather: every rank contributes a byte block and the root ends with all blocks in rank order.
// Blocks may differ in size (MPI's gatherv), as a vocabulary split unevenly over ranks does.
#pragma once

#include <cstddef>
#include <span>

#include "comm/communicator.h"

namespace cohort::comm {

// `sizes[r]` is rank r's block in bytes, the same list on every rank; `mine` holds
// sizes[rank()] bytes. On `root`, `all` holds the sum of `sizes` and block r lands at offset
// sizes[0] + ... + sizes[r - 1]; `mine` may already be the root's own block of `all` (nothing
// is copied then). Elsewhere `all` is not used and may be empty. Empty blocks are not sent.
Status Gather(Communicator& comm, int root, std::span<const std::byte> mine,
              std::span<const size_t> sizes, std::span<std::byte> all,
              const CollectiveOptions& options = {});

}  // namespace cohort::comm
