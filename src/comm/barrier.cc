// Barrier as an empty message to and from every peer: one round, and a rank that never
// arrives shows up as a timeout naming it (see barrier.h).
#include "comm/barrier.h"

namespace cohort::comm {

Status Barrier(Communicator& comm, const CollectiveOptions& options) {
  const uint32_t tag = comm.NextCollectiveTag();
  if (comm.size() == 1) return Status::Ok();
  const Deadline deadline = comm.DeadlineFor(options.timeout);
  std::vector<SendOp>& sends = comm.SendOps();
  std::vector<RecvOp>& recvs = comm.RecvOps();
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer == comm.rank()) continue;
    sends.push_back({peer, tag, {}});
    recvs.push_back({peer, tag, {}});
  }
  return comm.transport().Exchange(sends, recvs, deadline);
}

}  // namespace cohort::comm
