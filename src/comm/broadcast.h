// Broadcast: the root's bytes end up on every rank.
#pragma once

#include <span>

#include "comm/communicator.h"

namespace cohort::comm {

// On `root`, `data` is the source; elsewhere it is overwritten. Same size on every rank.
Status Broadcast(Communicator& comm, int root, std::span<std::byte> data,
                 const CollectiveOptions& options = {});

}  // namespace cohort::comm
