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

// The direct exchange keeps one pointer per rank on the stack; larger groups use the ring.
constexpr int kRanksMaxDirect = 64;

std::span<const std::byte> Bytes(std::span<const float> v) { return std::as_bytes(v); }
std::span<std::byte> Bytes(std::span<float> v) { return std::as_writable_bytes(v); }

// Sums the N sources element-wise in rank order, ((s0 + s1) + s2) + ..., into `out`, which is
// one of them. Every rank runs the same code on the same bytes, so every rank gets the same bits.
void SumInRankOrder(std::span<const float* const> sources, std::span<float> out) {
  const size_t n_sources = sources.size();
  float* dst = out.data();
  if (dst == sources[0] || dst == sources[1] || n_sources == 2) {
    // `out` is consumed by the first pass, so the sum can go straight into it: one pass per
    // source, which matters at activation sizes where the exchange itself takes microseconds.
    const float* a = sources[0];
    const float* b = sources[1];
    for (size_t i = 0; i < out.size(); ++i) dst[i] = a[i] + b[i];
    for (size_t r = 2; r < n_sources; ++r) {
      const float* add = sources[r];
      for (size_t i = 0; i < out.size(); ++i) dst[i] += add[i];
    }
    return;
  }
  // `out` is a later source: accumulate a cache-sized block aside before overwriting it.
  constexpr size_t kBlock = 512;
  float acc[kBlock];
  for (size_t begin = 0; begin < out.size(); begin += kBlock) {
    const size_t n = std::min(kBlock, out.size() - begin);
    for (size_t i = 0; i < n; ++i) acc[i] = sources[0][begin + i] + sources[1][begin + i];
    for (size_t r = 2; r < n_sources; ++r) {
      const float* add = sources[r] + begin;
      for (size_t i = 0; i < n; ++i) acc[i] += add[i];
    }
    std::copy(acc, acc + n, dst + begin);
  }
}

// Every rank gets every other rank's buffer into slot[r] and sums all N in rank order (its own
// straight from `data`, no copy).
Status DirectF32(Communicator& comm, std::span<float> data, uint32_t tag, Deadline deadline) {
  const int n = comm.size();
  const int me = comm.rank();
  const size_t count = data.size();
  std::span<float> slots = comm.ScratchAs<float>(count * n);
  std::vector<SendOp>& sends = comm.SendOps();
  std::vector<RecvOp>& recvs = comm.RecvOps();
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    sends.push_back({peer, tag, Bytes(std::span<const float>(data))});
    recvs.push_back({peer, tag, Bytes(slots.subspan(peer * count, count))});
  }
  COHORT_RETURN_IF_ERROR(comm.transport().Exchange(sends, recvs, deadline));
  const float* sources[kRanksMaxDirect];
  COHORT_CHECK_LE(n, kRanksMaxDirect);
  for (int r = 0; r < n; ++r) sources[r] = r == me ? data.data() : slots.data() + r * count;
  SumInRankOrder({sources, size_t(n)}, data);
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
  if (algorithm == AllReduceAlgorithm::kRing || comm.size() > kRanksMaxDirect) {
    return RingF32(comm, data, tag, deadline);
  }
  return DirectF32(comm, data, tag, deadline);
}

}  // namespace cohort::comm
