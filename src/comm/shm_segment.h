// Layout of one rank's shared-memory segment and the calls that create and map it: a header
// (identity, liveness, the futex doorbell) followed by one ring per peer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

inline constexpr uint32_t kShmMagic = 0x4d485343;  // "CSHM", written last when ready
inline constexpr uint32_t kShmVersion = 1;

// Fields written once by the owner before `magic`, then read-only, except where noted.
struct ShmHeader {
  std::atomic<uint32_t> magic;
  uint32_t version;
  uint32_t n_ranks;
  uint32_t rank;
  uint64_t ring_bytes;
  int32_t pid;
  std::atomic<uint32_t> closed;    // set by the owner when it leaves
  std::atomic<uint32_t> attached;  // incremented by each peer that mapped this segment
  alignas(64) std::atomic<uint32_t> doorbell;  // futex word the owner sleeps on
  alignas(64) std::atomic<uint32_t> sleeping;  // 1 while the owner is (about to be) asleep
};

// One ring: bytes from one peer to the segment's owner. Counters only grow; the offset in the
// data is counter % ring_bytes.
struct ShmRing {
  alignas(64) std::atomic<uint64_t> head;  // bytes written (by the peer)
  alignas(64) std::atomic<uint64_t> tail;  // bytes read (by the owner)
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }
  ShmSegment& operator=(ShmSegment&& other) noexcept;

  // Creates (replacing a stale one of the same name) and initialises the segment of `rank`.
  static Result<ShmSegment> Create(const std::string& path, int rank, int n_ranks,
                                   size_t ring_bytes);
  // Maps the segment of `rank`, created by that rank, waiting until it is ready.
  static Result<ShmSegment> Open(const std::string& path, int rank, int n_ranks,
                                 size_t ring_bytes, Deadline deadline);

  ShmHeader& header() const { return *reinterpret_cast<ShmHeader*>(base_); }
  ShmRing& ring(int from) const;
  std::byte* ring_data(int from) const;
  size_t ring_bytes() const { return ring_bytes_; }

 private:
  static size_t TotalBytes(int n_ranks, size_t ring_bytes);

  std::byte* base_ = nullptr;
  size_t bytes_ = 0;
  int n_ranks_ = 0;
  size_t ring_bytes_ = 0;
};

// "/cohort-<name>-<rank>"
std::string ShmPath(const std::string& name, int rank);

// False once the process is gone or a zombie (its memory is still mapped, but nobody will
// ever write to it again).
bool ProcessAlive(int32_t pid);

}  // namespace cohort::comm
