// The shared-memory transport's rendezvous and data path (see shm_transport.h): frames stream
// through per-pair rings with the same header and checks as on TCP.
#include "comm/shm_transport.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <thread>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "comm/frame.h"
#include "comm/framed_transport.h"
#include "comm/shm_segment.h"
#include "comm/wait.h"

namespace cohort::comm {
namespace {

// Sleep at most this long between liveness checks of the peers we wait for.
constexpr auto kLivenessInterval = std::chrono::milliseconds(10);

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Wakes the owner of `segment` if it sleeps; called after anything it may be waiting for.
void Notify(const ShmSegment& segment) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  ShmHeader& h = segment.header();
  if (h.sleeping.load(std::memory_order_relaxed) != 0) {
    h.doorbell.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&h.doorbell);
  }
}

class ShmTransport final : public FramedTransport {
 public:
  ShmTransport(const ShmOptions& options, std::vector<ShmSegment> segments)
      : FramedTransport("shm", options.rank, static_cast<int>(segments.size())),
        wait_(options.wait),
        segments_(std::move(segments)) {}
  ~ShmTransport() override { Close(); }

  Status Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                  Deadline deadline) override;
  void Close() override;

 private:
  bool ProgressSend(FrameSend* s);
  bool ProgressRecv(FrameRecv* r, Status* status);
  bool RunRound(Status* status, bool* pending);
  Status CheckPeersAlive();

  WaitPolicy wait_;
  std::vector<ShmSegment> segments_;  // segments_[rank_] is our own (our inbound rings)
};

// Copies as much of the frame as the peer's ring has room for.
bool ShmTransport::ProgressSend(FrameSend* s) {
  const ShmSegment& segment = segments_[s->peer];
  ShmRing& ring = segment.ring(rank_);
  const size_t capacity = segment.ring_bytes();
  const uint64_t head = ring.head.load(std::memory_order_relaxed);
  const uint64_t tail = ring.tail.load(std::memory_order_acquire);
  size_t room = capacity - static_cast<size_t>(head - tail);
  if (room == 0) return false;
  uint64_t at = head;
  std::byte* data = segment.ring_data(rank_);
  auto put = [&](const std::byte* src, size_t n) {
    const size_t offset = at % capacity;
    const size_t first = std::min(n, capacity - offset);
    std::memcpy(data + offset, src, first);
    std::memcpy(data, src + first, n - first);
    at += n;
  };
  const size_t total = kFrameHeaderBytes + s->payload.size();
  while (room > 0 && s->done < total) {
    const bool in_header = s->done < kFrameHeaderBytes;
    const std::byte* src = in_header ? s->header.data() + s->done
                                     : s->payload.data() + (s->done - kFrameHeaderBytes);
    const size_t left = in_header ? kFrameHeaderBytes - s->done : total - s->done;
    const size_t n = std::min(room, left);
    put(src, n);
    s->done += n;
    room -= n;
  }
  ring.head.store(at, std::memory_order_release);
  Notify(segment);
  return true;
}

// Copies whatever has arrived; the header is validated before any payload is taken.
bool ShmTransport::ProgressRecv(FrameRecv* r, Status* status) {
  const ShmSegment& own = segments_[rank_];
  ShmRing& ring = own.ring(r->peer);
  const size_t capacity = own.ring_bytes();
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  const uint64_t head = ring.head.load(std::memory_order_acquire);
  size_t available = static_cast<size_t>(head - tail);
  if (available == 0) return false;
  uint64_t at = tail;
  const std::byte* data = own.ring_data(r->peer);
  auto take = [&](std::byte* dst, size_t n) {
    const size_t offset = at % capacity;
    const size_t first = std::min(n, capacity - offset);
    std::memcpy(dst, data + offset, first);
    std::memcpy(dst + first, data, n - first);
    at += n;
  };
  const size_t total = kFrameHeaderBytes + r->payload.size();
  while (available > 0 && r->done < total) {
    if (r->done < kFrameHeaderBytes) {
      const size_t n = std::min(available, kFrameHeaderBytes - r->done);
      take(r->header.data() + r->done, n);
      r->done += n;
      available -= n;
      if (r->done == kFrameHeaderBytes) {
        *status = CheckFrameHeader(r->header, r->tag, r->payload.size(), r->peer);
        if (!status->ok()) break;
      }
    } else {
      const size_t n = std::min(available, total - r->done);
      take(r->payload.data() + (r->done - kFrameHeaderBytes), n);
      r->done += n;
      available -= n;
    }
  }
  ring.tail.store(at, std::memory_order_release);
  Notify(segments_[r->peer]);  // the peer may be waiting for room
  return true;
}

bool ShmTransport::RunRound(Status* status, bool* pending) {
  bool progressed = false;
  *pending = false;
  for (FrameSend& s : sends_) {
    if (s.finished()) continue;
    progressed |= ProgressSend(&s);
    *pending |= !s.finished();
  }
  for (FrameRecv& r : recvs_) {
    if (r.finished()) continue;
    progressed |= ProgressRecv(&r, status);
    if (!status->ok()) return progressed;
    *pending |= !r.finished();
  }
  return progressed;
}

Status ShmTransport::CheckPeersAlive() {
  auto check = [&](int peer) -> Status {
    const ShmHeader& h = segments_[peer].header();
    if (h.closed.load(std::memory_order_acquire) != 0) {
      return Unavailable(fmt::format("rank {} closed its transport", peer));
    }
    if (!ProcessAlive(h.pid)) return Unavailable(fmt::format("rank {} (pid {}) died", peer, h.pid));
    return Status::Ok();
  };
  for (const FrameSend& s : sends_) {
    if (!s.finished()) COHORT_RETURN_IF_ERROR(check(s.peer));
  }
  for (const FrameRecv& r : recvs_) {
    if (!r.finished()) COHORT_RETURN_IF_ERROR(check(r.peer));
  }
  return Status::Ok();
}

Status ShmTransport::Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                              Deadline deadline) {
  COHORT_RETURN_IF_ERROR(BeginExchange(sends, recvs));
  ShmHeader& own = segments_[rank_].header();
  Backoff backoff(wait_);
  Status status;
  auto last_liveness_check = Clock::now();
  for (;;) {
    bool pending = false;
    const bool progressed = RunRound(&status, &pending);
    if (!status.ok()) return Fail(status);
    if (!pending) return Status::Ok();
    if (progressed) {
      backoff.Progressed();
      continue;
    }
    const auto now = Clock::now();
    if (now >= deadline) return Fail(Timeout("timed out waiting for a peer"));
    if (!backoff.ShouldBlock()) {
      // Busy-polling never reaches the sleep below; look at the peers' liveness now and then.
      if (now - last_liveness_check >= kLivenessInterval) {
        last_liveness_check = now;
        Status alive = CheckPeersAlive();
        if (!alive.ok() && !RunRound(&status, &pending) && status.ok() && pending) return Fail(alive);
      }
      continue;
    }
    // Announce the sleep, then look once more so a peer's write cannot slip between.
    own.sleeping.store(1, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    const uint32_t bell = own.doorbell.load(std::memory_order_seq_cst);
    if (RunRound(&status, &pending) || !status.ok() || !pending) {
      own.sleeping.store(0, std::memory_order_relaxed);
      continue;
    }
    Status alive = CheckPeersAlive();
    if (!alive.ok()) {
      own.sleeping.store(0, std::memory_order_relaxed);
      // A peer that left may still have left bytes behind; take them before giving up.
      if (RunRound(&status, &pending) || !status.ok() || !pending) continue;
      return Fail(alive);
    }
    FutexWait(&own.doorbell, bell, std::min<Clock::duration>(deadline - now, kLivenessInterval));
    own.sleeping.store(0, std::memory_order_relaxed);
  }
}

void ShmTransport::Close() {
  if (!MarkClosed()) return;
  segments_[rank_].header().closed.store(1, std::memory_order_release);
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank_) continue;
    ShmHeader& h = segments_[peer].header();
    h.doorbell.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&h.doorbell);
  }
}

}  // namespace

Status ShmOptions::Validate() const {
  if (n_ranks < 1 || n_ranks > 256) return InvalidArgument(fmt::format("{} ranks is not 1..256", n_ranks));
  if (rank < 0 || rank >= n_ranks) return InvalidArgument(fmt::format("rank {} is not in 0..{}", rank, n_ranks - 1));
  if (name.empty() || name.size() > 200) return InvalidArgument("shm group name must be 1..200 chars");
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return InvalidArgument(fmt::format("shm group name '{}' has a character other than "
                                         "letters, digits, '-', '_', '.'", name));
    }
  }
  if (ring_bytes < 4096) return InvalidArgument("shm ring must hold at least 4096 bytes");
  if (connect_timeout.count() <= 0) return InvalidArgument("connect timeout must be positive");
  return Status::Ok();
}

Result<std::unique_ptr<Transport>> ConnectShmGroup(const ShmOptions& options) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  const Deadline deadline = DeadlineAfter(options.connect_timeout);
  const int n = options.n_ranks;
  const std::string own_path = ShmPath(options.name, options.rank);
  std::vector<ShmSegment> segments(n);
  COHORT_ASSIGN_OR_RETURN(segments[options.rank],
                          ShmSegment::Create(own_path, options.rank, n, options.ring_bytes));
  auto fail = [&](Status status) {
    shm_unlink(own_path.c_str());
    return status.Annotate(fmt::format("shm rank {} joining '{}'", options.rank, options.name));
  };
  for (int peer = 0; peer < n; ++peer) {
    if (peer == options.rank) continue;
    Result<ShmSegment> segment =
        ShmSegment::Open(ShmPath(options.name, peer), peer, n, options.ring_bytes, deadline);
    if (!segment.ok()) return fail(segment.status());
    segments[peer] = std::move(segment).value();
    segments[peer].header().attached.fetch_add(1, std::memory_order_acq_rel);
  }
  // Unlink our name only once everyone has mapped it, so it never outlives the group.
  ShmHeader& own = segments[options.rank].header();
  while (own.attached.load(std::memory_order_acquire) < uint32_t(n - 1)) {
    if (Clock::now() >= deadline) return fail(Timeout("not every peer mapped our segment in time"));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  shm_unlink(own_path.c_str());
  return std::unique_ptr<Transport>(new ShmTransport(options, std::move(segments)));
}

}  // namespace cohort::comm
