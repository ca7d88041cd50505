// The TCP transport's data path: one loop that moves every pending send and receive of an
// Exchange forward on non-blocking sockets, validating each frame header before its payload.
#include "comm/tcp_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "comm/frame.h"
#include "comm/framed_transport.h"
#include "comm/link_emulator.h"
#include "comm/socket_util.h"
#include "comm/wait.h"

namespace cohort::comm {
namespace {

bool WouldBlock(int error) { return error == EAGAIN || error == EWOULDBLOCK || error == EINTR; }

// A blocking receive gives up after this long, so the deadline and the emulator's errors are
// looked at regularly.
constexpr auto kBlockingSlice = std::chrono::milliseconds(10);

// Sockets stay in blocking mode so that BlockingRecv can sleep in recv() itself; every other
// call passes MSG_DONTWAIT.
void ConfigureBlockingSlices(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  timeval slice{0, static_cast<suseconds_t>(
                       std::chrono::duration_cast<std::chrono::microseconds>(kBlockingSlice).count())};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &slice, sizeof(slice));
}

class TcpTransport final : public FramedTransport {
 public:
  TcpTransport(int rank, std::vector<int> fds, const TcpOptions& options)
      : FramedTransport("tcp", rank, static_cast<int>(fds.size())),
        fds_(std::move(fds)),
        wait_(options.wait) {
    for (int fd : fds_) {
      if (fd >= 0) ConfigureBlockingSlices(fd);
    }
    if (options.link.enabled()) emulator_ = std::make_unique<LinkEmulator>(options.link, fds_);
    pollfds_.reserve(fds_.size());
  }
  ~TcpTransport() override { Close(); }

  Status Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                  Deadline deadline) override;
  void Close() override;
  void Interrupt() override;

 private:
  Status ProgressSend(FrameSend* s, bool* progressed);
  Status ProgressRecv(FrameRecv* r, bool* progressed);
  Status BlockingRecv(FrameRecv* r);
  Status Block(Deadline deadline);
  FrameRecv* OnlyPendingRecv();
  std::string DescribePending() const;

  std::vector<int> fds_;
  WaitPolicy wait_;
  std::unique_ptr<LinkEmulator> emulator_;
  std::vector<pollfd> pollfds_;  // reused across calls
};

Status TcpTransport::Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                              Deadline deadline) {
  COHORT_RETURN_IF_ERROR(BeginExchange(sends, recvs));
  if (emulator_ != nullptr) {
    // Delivered later by the emulator thread; this loop then only receives.
    for (const FrameSend& s : sends_) emulator_->Enqueue(s.peer, s.header, s.payload);
    sends_.clear();
  }

  Backoff backoff(wait_);
  for (;;) {
    bool progressed = false;
    bool pending = false;
    for (FrameSend& s : sends_) {
      if (s.finished()) continue;
      Status status = ProgressSend(&s, &progressed);
      if (!status.ok()) return Fail(status);
      pending |= !s.finished();
    }
    for (FrameRecv& r : recvs_) {
      if (r.finished()) continue;
      Status status = ProgressRecv(&r, &progressed);
      if (!status.ok()) return Fail(status);
      pending |= !r.finished();
    }
    if (emulator_ != nullptr) {
      Status status = emulator_->status();
      if (!status.ok()) return Fail(status);
    }
    if (!pending) return Status::Ok();
    if (progressed) {
      backoff.Progressed();
      continue;
    }
    if (Clock::now() >= deadline) {
      return Fail(Timeout("timed out waiting for " + DescribePending()));
    }
    if (!backoff.ShouldBlock()) continue;
    FrameRecv* last = OnlyPendingRecv();
    if (last != nullptr) {
      COHORT_RETURN_IF_ERROR(BlockingRecv(last));
    } else {
      COHORT_RETURN_IF_ERROR(Block(deadline));
    }
  }
}

// The one receive still pending when every send is done, or null. This is the common case
// (two ranks, a ring step, a pipeline hop) and the one BlockingRecv serves.
FrameRecv* TcpTransport::OnlyPendingRecv() {
  if (emulator_ != nullptr) return nullptr;
  for (const FrameSend& s : sends_) {
    if (!s.finished()) return nullptr;
  }
  FrameRecv* found = nullptr;
  for (FrameRecv& r : recvs_) {
    if (r.finished()) continue;
    if (found != nullptr) return nullptr;
    found = &r;
  }
  return found;
}

// Sleeps in recv() itself, as a plain socket program would: measured on loopback, this saves
// the failed read and the poll() of the general path, about a quarter of a 16 KB exchange.
// Returns after at most kBlockingSlice with or without progress.
Status TcpTransport::BlockingRecv(FrameRecv* r) {
  std::byte* dst;
  size_t want;
  if (r->done < kFrameHeaderBytes) {
    dst = r->header.data() + r->done;
    want = kFrameHeaderBytes - r->done;  // the header first: its length is not trusted yet
  } else {
    dst = r->payload.data() + (r->done - kFrameHeaderBytes);
    want = r->payload.size() - (r->done - kFrameHeaderBytes);
  }
  const ssize_t n = recv(fds_[r->peer], dst, want, MSG_WAITALL);
  if (n == 0) return Fail(Unavailable(fmt::format("rank {} closed the connection", r->peer)));
  if (n < 0) {
    if (WouldBlock(errno)) return Status::Ok();
    return Fail(Unavailable(fmt::format("recv from rank {} failed: {}", r->peer, std::strerror(errno))));
  }
  const bool header_was_partial = r->done < kFrameHeaderBytes;
  r->done += static_cast<size_t>(n);
  if (header_was_partial && r->done == kFrameHeaderBytes) {
    Status status = CheckFrameHeader(r->header, r->tag, r->payload.size(), r->peer);
    if (!status.ok()) return Fail(status);
  }
  return Status::Ok();
}

Status TcpTransport::ProgressSend(FrameSend* s, bool* progressed) {
  iovec iov[2];
  int n_iov = 0;
  if (s->done < kFrameHeaderBytes) {
    iov[n_iov++] = {s->header.data() + s->done, kFrameHeaderBytes - s->done};
  }
  const size_t payload_done = s->done > kFrameHeaderBytes ? s->done - kFrameHeaderBytes : 0;
  if (payload_done < s->payload.size()) {
    iov[n_iov++] = {const_cast<std::byte*>(s->payload.data()) + payload_done,
                    s->payload.size() - payload_done};
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  const ssize_t n = sendmsg(fds_[s->peer], &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) {
    s->done += static_cast<size_t>(n);
    *progressed = true;
    return Status::Ok();
  }
  if (n < 0 && WouldBlock(errno)) return Status::Ok();
  return Unavailable(fmt::format("send to rank {} failed: {} (peer gone?)", s->peer,
                                 n < 0 ? std::strerror(errno) : "no progress"));
}

// Reads header and payload with one readv: the payload lands straight in the caller's buffer,
// which is ours to scribble on, and the header is checked as soon as it is complete (a bad one
// fails the call, so bytes read past it are never trusted or used to size anything).
Status TcpTransport::ProgressRecv(FrameRecv* r, bool* progressed) {
  iovec iov[2];
  int n_iov = 0;
  if (r->done < kFrameHeaderBytes) {
    iov[n_iov++] = {r->header.data() + r->done, kFrameHeaderBytes - r->done};
  }
  const size_t payload_done = r->done > kFrameHeaderBytes ? r->done - kFrameHeaderBytes : 0;
  if (payload_done < r->payload.size()) {
    iov[n_iov++] = {r->payload.data() + payload_done, r->payload.size() - payload_done};
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  const ssize_t n = recvmsg(fds_[r->peer], &msg, MSG_DONTWAIT);
  if (n == 0) return Unavailable(fmt::format("rank {} closed the connection", r->peer));
  if (n < 0) {
    if (WouldBlock(errno)) return Status::Ok();
    return Unavailable(fmt::format("recv from rank {} failed: {}", r->peer, std::strerror(errno)));
  }
  const bool header_was_partial = r->done < kFrameHeaderBytes;
  r->done += static_cast<size_t>(n);
  *progressed = true;
  if (header_was_partial && r->done >= kFrameHeaderBytes) {
    COHORT_RETURN_IF_ERROR(CheckFrameHeader(r->header, r->tag, r->payload.size(), r->peer));
  }
  return Status::Ok();
}

Status TcpTransport::Block(Deadline deadline) {
  pollfds_.clear();
  for (const FrameSend& s : sends_) {
    if (!s.finished()) pollfds_.push_back({fds_[s.peer], POLLOUT, 0});
  }
  for (const FrameRecv& r : recvs_) {
    if (!r.finished()) pollfds_.push_back({fds_[r.peer], POLLIN, 0});
  }
  // The emulator reports errors asynchronously; do not sleep past a few ms without looking.
  int timeout_ms = PollTimeoutMs(deadline);
  if (emulator_ != nullptr) timeout_ms = std::min(timeout_ms, 5);
  const int n = poll(pollfds_.data(), pollfds_.size(), timeout_ms);
  if (n < 0 && errno != EINTR) return Fail(IoError(fmt::format("poll: {}", std::strerror(errno))));
  return Status::Ok();
}

std::string TcpTransport::DescribePending() const {
  std::string out;
  for (const FrameSend& s : sends_) {
    if (!s.finished()) out += fmt::format("{}send to rank {}", out.empty() ? "" : ", ", s.peer);
  }
  for (const FrameRecv& r : recvs_) {
    if (!r.finished()) {
      out += fmt::format("{}recv from rank {} ({} of {} bytes)", out.empty() ? "" : ", ", r.peer,
                         r.done, r.payload.size() + kFrameHeaderBytes);
    }
  }
  return out;
}

void TcpTransport::Interrupt() {
  for (int fd : fds_) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
  }
}

void TcpTransport::Close() {
  if (!MarkClosed()) return;
  if (emulator_ != nullptr) {
    emulator_->Flush(DeadlineAfter(std::chrono::seconds(1)));
    emulator_.reset();
  }
  for (int& fd : fds_) {
    if (fd >= 0) shutdown(fd, SHUT_RDWR);
    CloseFd(&fd);
  }
}

}  // namespace

std::unique_ptr<Transport> MakeTcpTransport(int rank, std::vector<int> fds,
                                            const TcpOptions& options) {
  return std::make_unique<TcpTransport>(rank, std::move(fds), options);
}

}  // namespace cohort::comm
