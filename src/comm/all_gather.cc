// All-gather by direct exchange or around a ring (see all_gather.h).
#include "comm/all_gather.h"

#include <algorithm>

namespace cohort::comm {

Status AllGather(Communicator& comm, std::span<const std::byte> mine, std::span<std::byte> all,
                 const CollectiveOptions& options) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t block = mine.size();
  COHORT_CHECK_EQ(all.size(), block * n);
  const uint32_t tag = comm.NextCollectiveTag();
  std::copy(mine.begin(), mine.end(), all.begin() + me * block);
  if (n == 1) return Status::Ok();
  const Deadline deadline = comm.DeadlineFor(options.timeout);
  if (block * n <= comm.options().direct_bytes_max || n == 2) {
    std::vector<SendOp>& sends = comm.SendOps();
    std::vector<RecvOp>& recvs = comm.RecvOps();
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      sends.push_back({peer, tag, mine});
      recvs.push_back({peer, tag, all.subspan(peer * block, block)});
    }
    return comm.transport().Exchange(sends, recvs, deadline);
  }
  // Ring: at step k pass on the block that arrived at step k-1 (this rank's own at step 0).
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  for (int step = 0; step < n - 1; ++step) {
    const int out = (me - step + n) % n;
    const int in = (me - step - 1 + 2 * n) % n;
    const SendOp send{next, tag, all.subspan(out * block, block)};
    const RecvOp recv{prev, tag, all.subspan(in * block, block)};
    COHORT_RETURN_IF_ERROR(comm.transport().Exchange({&send, 1}, {&recv, 1}, deadline));
  }
  return Status::Ok();
}

}  // namespace cohort::comm
