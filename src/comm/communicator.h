// A Communicator is one rank's handle on a group: its transport, the defaults every collective
// uses (timeout, algorithm threshold), the sequence that tags collectives so ranks that drift
// apart get an error instead of mixed-up data, and scratch memory kept between calls.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

struct CommOptions {
  std::chrono::milliseconds timeout{30000};  // each collective's bound unless it says otherwise
  // All-reduce and all-gather move messages up to this size by direct exchange (one round,
  // latency-bound sizes) and larger ones around a ring (bandwidth-bound sizes).
  size_t direct_bytes_max = 64 * 1024;

  Status Validate() const;
};

// Options every collective accepts; a zero timeout means the communicator's default.
struct CollectiveOptions {
  std::chrono::milliseconds timeout{0};
};

class Communicator {
 public:
  explicit Communicator(std::unique_ptr<Transport> transport, CommOptions options = {});
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return transport_->rank(); }
  int size() const { return transport_->size(); }
  Transport& transport() { return *transport_; }
  const CommOptions& options() const { return options_; }

  Deadline DeadlineFor(std::chrono::milliseconds timeout) const {
    return DeadlineAfter(timeout.count() > 0 ? timeout : options_.timeout);
  }
  // Tags of collectives have the high bit set; point-to-point user tags must not.
  uint32_t NextCollectiveTag() { return kCollectiveTagBit | (collective_sequence_++ & ~kCollectiveTagBit); }

  // Scratch memory of at least `bytes`, 64-byte aligned, reused by the next call (so one
  // collective at a time). Grows to the largest request and stays.
  std::span<std::byte> Scratch(size_t bytes);
  template <typename T>
  std::span<T> ScratchAs(size_t count) {
    return {reinterpret_cast<T*>(Scratch(count * sizeof(T)).data()), count};
  }

  // Operation lists for Exchange, cleared, with room for one op per rank (no allocation).
  std::vector<SendOp>& SendOps() {
    send_ops_.clear();
    return send_ops_;
  }
  std::vector<RecvOp>& RecvOps() {
    recv_ops_.clear();
    return recv_ops_;
  }

  static constexpr uint32_t kCollectiveTagBit = 0x80000000u;

 private:
  std::unique_ptr<Transport> transport_;
  CommOptions options_;
  uint32_t collective_sequence_ = 0;
  std::vector<std::byte> scratch_storage_;
  std::span<std::byte> scratch_;
  std::vector<SendOp> send_ops_;
  std::vector<RecvOp> recv_ops_;
};

}  // namespace cohort::comm
