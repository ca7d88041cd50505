// All-reduce algorithms: direct exchange, ring reduce-scatter + all-gather, and the 8-bit
// direct variant (see all_reduce.h).
#include "comm/all_reduce.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/q8_wire.h"
#include "core/thread_pool.h"

namespace cohort::comm {
namespace {

std::span<const std::byte> Bytes(std::span<const float> v) { return std::as_bytes(v); }
std::span<std::byte> Bytes(std::span<float> v) { return std::as_writable_bytes(v); }

// Every rank gets every rank's buffer into slot[r] and sums slots 0..N-1 in that order.
Status DirectF32(Communicator& comm, std::span<float> data, uint32_t tag, Deadline deadline) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t count = data.size();
  std::span<float> slots = comm.ScratchAs<float>(count * n);
  std::copy(data.begin(), data.end(), slots.begin() + me * count);
  std::vector<SendOp>& sends = comm.SendOps();
  std::vector<RecvOp>& recvs = comm.RecvOps();
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    sends.push_back({peer, tag, Bytes(std::span<const float>(data))});
    recvs.push_back({peer, tag, Bytes(slots.subspan(peer * count, count))});
  }
  COHORT_RETURN_IF_ERROR(comm.transport().Exchange(sends, recvs, deadline));
  std::copy(slots.begin(), slots.begin() + count, data.begin());
  for (int src = 1; src < n; ++src) {
    const float* add = slots.data() + src * count;
    for (size_t i = 0; i < count; ++i) data[i] += add[i];
  }
  return Status::Ok();
}

Status DirectQ8(Communicator& comm, std::span<float> data, uint32_t tag, Deadline deadline) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t wire_bytes = Q8WireBytes(data.size());
  std::span<std::byte> slots = comm.Scratch(wire_bytes * n);
  std::span<std::byte> mine = slots.subspan(me * wire_bytes, wire_bytes);
  QuantizeQ8(data, mine);
  std::vector<SendOp>& sends = comm.SendOps();
  std::vector<RecvOp>& recvs = comm.RecvOps();
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    sends.push_back({peer, tag, mine});
    recvs.push_back({peer, tag, slots.subspan(peer * wire_bytes, wire_bytes)});
  }
  COHORT_RETURN_IF_ERROR(comm.transport().Exchange(sends, recvs, deadline));
  // Every rank, this one included, sums the same quantized contributions in the same order.
  std::fill(data.begin(), data.end(), 0.0f);
  for (int src = 0; src < n; ++src) AccumulateQ8(slots.subspan(src * wire_bytes, wire_bytes), data);
  return Status::Ok();
}

std::span<float> Chunk(std::span<float> data, int index, int parts) {
  int64_t begin, end;
  SplitRange(static_cast<int64_t>(data.size()), index, parts, &begin, &end);
  return data.subspan(begin, end - begin);
}

Status RingF32(Communicator& comm, std::span<float> data, uint32_t tag, Deadline deadline) {
  const int n = comm.size();
  const int me = comm.rank();
  const int next = (me + 1) % n;
  const int prev = (me + n - 1) % n;
  std::span<float> incoming = comm.ScratchAs<float>(data.size() / n + 1);
  // Reduce-scatter: after step k, chunk (me - k - 1) holds the sum of k + 2 ranks' values;
  // after N-1 steps this rank holds the complete chunk (me + 1) mod N.
  for (int step = 0; step < n - 1; ++step) {
    std::span<float> out = Chunk(data, (me - step + n) % n, n);
    std::span<float> in = Chunk(data, (me - step - 1 + 2 * n) % n, n);
    const SendOp send{next, tag, Bytes(std::span<const float>(out))};
    const RecvOp recv{prev, tag, Bytes(incoming.first(in.size()))};
    COHORT_RETURN_IF_ERROR(comm.transport().Exchange({&send, 1}, {&recv, 1}, deadline));
    for (size_t i = 0; i < in.size(); ++i) in[i] = incoming[i] + in[i];
  }
  // All-gather: pass the complete chunks on, received straight into place.
  for (int step = 0; step < n - 1; ++step) {
    std::span<float> out = Chunk(data, (me + 1 - step + n) % n, n);
    std::span<float> in = Chunk(data, (me - step + n) % n, n);
    const SendOp send{next, tag, Bytes(std::span<const float>(out))};
    const RecvOp recv{prev, tag, Bytes(in)};
    COHORT_RETURN_IF_ERROR(comm.transport().Exchange({&send, 1}, {&recv, 1}, deadline));
  }
  return Status::Ok();
}

}  // namespace

AllReduceAlgorithm ChooseAllReduceAlgorithm(size_t bytes, int n_ranks, const CommOptions& options) {
  // With two ranks the ring moves the same bytes in twice the rounds: direct always wins.
  if (n_ranks <= 2) return AllReduceAlgorithm::kDirect;
  return bytes <= options.direct_bytes_max ? AllReduceAlgorithm::kDirect : AllReduceAlgorithm::kRing;
}

Status AllReduceSum(Communicator& comm, std::span<float> data, const AllReduceOptions& options) {
  const uint32_t tag = comm.NextCollectiveTag();
  if (comm.size() == 1) return Status::Ok();
  const Deadline deadline = comm.DeadlineFor(options.timeout);
  if (options.wire == WireFormat::kQ8) return DirectQ8(comm, data, tag, deadline);
  AllReduceAlgorithm algorithm = options.algorithm;
  if (algorithm == AllReduceAlgorithm::kAuto) {
    algorithm = ChooseAllReduceAlgorithm(data.size_bytes(), comm.size(), comm.options());
  }
  if (algorithm == AllReduceAlgorithm::kRing) return RingF32(comm, data, tag, deadline);
  return DirectF32(comm, data, tag, deadline);
}

}  // namespace cohort::comm
