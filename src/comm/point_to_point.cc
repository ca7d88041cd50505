// Point-to-point send and receive (see point_to_point.h).
#include "comm/point_to_point.h"

namespace cohort::comm {

Status SendTo(Communicator& comm, int peer, std::span<const std::byte> data, uint32_t tag,
              const CollectiveOptions& options) {
  COHORT_CHECK_LT(tag, Communicator::kCollectiveTagBit);
  return comm.transport().Send(peer, tag, data, comm.DeadlineFor(options.timeout));
}

Status RecvFrom(Communicator& comm, int peer, std::span<std::byte> data, uint32_t tag,
                const CollectiveOptions& options) {
  COHORT_CHECK_LT(tag, Communicator::kCollectiveTagBit);
  return comm.transport().Recv(peer, tag, data, comm.DeadlineFor(options.timeout));
}

}  // namespace cohort::comm
