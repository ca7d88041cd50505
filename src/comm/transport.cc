// Argument checks shared by every Transport implementation.
#include "comm/transport.h"

#include <vector>

namespace cohort::comm {

void CheckExchangeArgs(int rank, int size, std::span<const SendOp> sends,
                       std::span<const RecvOp> recvs) {
  std::vector<bool> send_seen(size, false), recv_seen(size, false);
  for (const SendOp& op : sends) {
    COHORT_CHECK(op.peer >= 0 && op.peer < size);
    COHORT_CHECK_NE(op.peer, rank);
    COHORT_CHECK(!send_seen[op.peer]);  // one send per peer per Exchange
    send_seen[op.peer] = true;
  }
  for (const RecvOp& op : recvs) {
    COHORT_CHECK(op.peer >= 0 && op.peer < size);
    COHORT_CHECK_NE(op.peer, rank);
    COHORT_CHECK(!recv_seen[op.peer]);  // one receive per peer per Exchange
    recv_seen[op.peer] = true;
  }
}

}  // namespace cohort::comm
