// Gather as one round into the root (see gather.h). Only the root receives, and groups are a
// handful of machines, so a tree would only add rounds.
#include "comm/gather.h"

#include <algorithm>
#include <numeric>

namespace cohort::comm {

Status Gather(Communicator& comm, int root, std::span<const std::byte> mine,
              std::span<const size_t> sizes, std::span<std::byte> all,
              const CollectiveOptions& options) {
  const int n = comm.size();
  const int me = comm.rank();
  COHORT_CHECK(root >= 0 && root < n);
  COHORT_CHECK_EQ(sizes.size(), static_cast<size_t>(n));
  COHORT_CHECK_EQ(mine.size(), sizes[me]);
  const uint32_t tag = comm.NextCollectiveTag();
  const Deadline deadline = comm.DeadlineFor(options.timeout);
  if (me != root) {
    if (mine.empty()) return Status::Ok();
    return comm.transport().Send(root, tag, mine, deadline);
  }
  COHORT_CHECK_EQ(all.size(), std::accumulate(sizes.begin(), sizes.end(), size_t{0}));
  std::vector<RecvOp>& recvs = comm.RecvOps();
  size_t offset = 0;
  for (int peer = 0; peer < n; ++peer) {
    const std::span<std::byte> block = all.subspan(offset, sizes[peer]);
    offset += sizes[peer];
    if (peer == me) {
      if (mine.data() != block.data()) std::copy(mine.begin(), mine.end(), block.begin());
    } else if (!block.empty()) {
      recvs.push_back({peer, tag, block});
    }
  }
  if (recvs.empty()) return Status::Ok();
  return comm.transport().Exchange({}, recvs, deadline);
}

}  // namespace cohort::comm
