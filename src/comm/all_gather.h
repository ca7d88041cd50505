// All-gather: every rank contributes an equal-sized byte block and every rank ends with all
// blocks in rank order.
#pragma once

#include <span>

#include "comm/communicator.h"

namespace cohort::comm {

// `all` must hold size() × mine.size() bytes; block r comes from rank r. Direct exchange for
// small blocks, a ring for large ones (CommOptions::direct_bytes_max).
Status AllGather(Communicator& comm, std::span<const std::byte> mine, std::span<std::byte> all,
                 const CollectiveOptions& options = {});

}  // namespace cohort::comm
