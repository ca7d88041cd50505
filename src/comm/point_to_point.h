// Point-to-point messages between two ranks of a group (pipeline stages pass activations this
// way). Unlike collectives only the two ranks take part.
#pragma once

#include <cstdint>
#include <span>

#include "comm/communicator.h"

namespace cohort::comm {

// `tag` tells messages apart and must be below Communicator::kCollectiveTagBit; the receiver
// must expect the same tag and exact size.
Status SendTo(Communicator& comm, int peer, std::span<const std::byte> data, uint32_t tag = 0,
              const CollectiveOptions& options = {});
Status RecvFrom(Communicator& comm, int peer, std::span<std::byte> data, uint32_t tag = 0,
                const CollectiveOptions& options = {});

}  // namespace cohort::comm
