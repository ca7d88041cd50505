// Broadcast as one round from the root to every rank (see broadcast.h). Group sizes are
// small (a handful of machines), so a tree would only add rounds.
#include "comm/broadcast.h"

namespace cohort::comm {

Status Broadcast(Communicator& comm, int root, std::span<std::byte> data,
                 const CollectiveOptions& options) {
  COHORT_CHECK(root >= 0 && root < comm.size());
  const uint32_t tag = comm.NextCollectiveTag();
  if (comm.size() == 1) return Status::Ok();
  const Deadline deadline = comm.DeadlineFor(options.timeout);
  if (comm.rank() != root) return comm.transport().Recv(root, tag, data, deadline);
  std::vector<SendOp>& sends = comm.SendOps();
  for (int peer = 0; peer < comm.size(); ++peer) {
    if (peer != root) sends.push_back({peer, tag, data});
  }
  return comm.transport().Exchange(sends, {}, deadline);
}

}  // namespace cohort::comm
