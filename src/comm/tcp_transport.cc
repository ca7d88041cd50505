// The TCP transport's data path: one loop that moves every pending send and receive of an
// Exchange forward on non-blocking sockets, validating each frame header before its payload.
// With a secret, each frame's payload travels sealed (secure_channel.h): the clear header is
// the record's authenticated data, the tag follows the ciphertext, and a frame is opened in
// place in the caller's buffer once its last byte is in.
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
#include "comm/secure_channel.h"
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
  TcpTransport(int rank, std::vector<int> fds, const TcpOptions& options,
               std::vector<std::unique_ptr<SecureSession>> sessions)
      : FramedTransport("tcp", rank, static_cast<int>(fds.size())),
        fds_(std::move(fds)),
        wait_(options.wait),
        sessions_(std::move(sessions)) {
    COHORT_CHECK(sessions_.empty() || sessions_.size() == fds_.size());
    sealed_.resize(sessions_.size());
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
  Status AfterRecv(FrameRecv* r, size_t n);
  void SealSends();
  Status Block(Deadline deadline);
  FrameRecv* OnlyPendingRecv();
  std::string DescribePending() const;

  std::vector<int> fds_;
  WaitPolicy wait_;
  std::unique_ptr<LinkEmulator> emulator_;
  std::vector<pollfd> pollfds_;  // reused across calls
  // Per peer, when encrypted (empty otherwise): the session, and the ciphertext buffer its
  // sends are sealed into (grown to the largest frame, then reused: no allocation per frame).
  std::vector<std::unique_ptr<SecureSession>> sessions_;
  std::vector<std::vector<std::byte>> sealed_;
};

// Seals every send of this Exchange into its peer's buffer and points the send at it; the
// receives expect a tag after their payload.
void TcpTransport::SealSends() {
  for (FrameSend& s : sends_) {
    std::vector<std::byte>& buffer = sealed_[s.peer];
    const size_t n = s.payload.size() + kSealTagBytes;
    if (buffer.size() < n) buffer.resize(n);
    sessions_[s.peer]->Seal(s.header, s.payload, std::span<std::byte>(buffer.data(), n));
    s.payload = std::span<const std::byte>(buffer.data(), n);
  }
  for (FrameRecv& r : recvs_) r.trailer_bytes = kSealTagBytes;
}

// The bookkeeping after `n` bytes of r arrived: the header is checked once complete (before
// any payload byte is trusted), and a complete encrypted frame is opened.
Status TcpTransport::AfterRecv(FrameRecv* r, size_t n) {
  const bool header_was_partial = r->done < kFrameHeaderBytes;
  r->done += n;
  if (header_was_partial && r->done >= kFrameHeaderBytes) {
    COHORT_RETURN_IF_ERROR(CheckFrameHeader(r->header, r->tag, r->payload.size(), r->peer));
  }
  if (r->trailer_bytes > 0 && r->finished()) {
    Status opened = sessions_[r->peer]->Open(r->header, r->payload, r->trailer);
    if (!opened.ok()) return opened.Annotate(fmt::format("from rank {}", r->peer));
  }
  return Status::Ok();
}

// Where the next bytes of r go: header, payload, trailer, whichever are still missing.
int RecvIov(FrameRecv* r, iovec iov[3]) {
  int n_iov = 0;
  if (r->done < kFrameHeaderBytes) {
    iov[n_iov++] = {r->header.data() + r->done, kFrameHeaderBytes - r->done};
  }
  const size_t payload_done = r->done > kFrameHeaderBytes ? r->done - kFrameHeaderBytes : 0;
  if (payload_done < r->payload.size()) {
    iov[n_iov++] = {r->payload.data() + payload_done, r->payload.size() - payload_done};
  }
  const size_t before_trailer = kFrameHeaderBytes + r->payload.size();
  const size_t trailer_done = r->done > before_trailer ? r->done - before_trailer : 0;
  if (trailer_done < r->trailer_bytes) {
    iov[n_iov++] = {r->trailer.data() + trailer_done, r->trailer_bytes - trailer_done};
  }
  return n_iov;
}

Status TcpTransport::Exchange(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                              Deadline deadline) {
  COHORT_RETURN_IF_ERROR(BeginExchange(sends, recvs));
  if (!sessions_.empty()) SealSends();
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
  // One segment at a time, the header first: its length is not trusted yet.
  iovec iov[3];
  RecvIov(r, iov);
  const ssize_t n = recv(fds_[r->peer], iov[0].iov_base, iov[0].iov_len, MSG_WAITALL);
  if (n == 0) return Fail(Unavailable(fmt::format("rank {} closed the connection", r->peer)));
  if (n < 0) {
    if (WouldBlock(errno)) return Status::Ok();
    return Fail(Unavailable(fmt::format("recv from rank {} failed: {}", r->peer, std::strerror(errno))));
  }
  Status status = AfterRecv(r, static_cast<size_t>(n));
  if (!status.ok()) return Fail(status);
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
  iovec iov[3];
  const int n_iov = RecvIov(r, iov);
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(n_iov);
  const ssize_t n = recvmsg(fds_[r->peer], &msg, MSG_DONTWAIT);
  if (n == 0) return Unavailable(fmt::format("rank {} closed the connection", r->peer));
  if (n < 0) {
    if (WouldBlock(errno)) return Status::Ok();
    return Unavailable(fmt::format("recv from rank {} failed: {}", r->peer, std::strerror(errno)));
  }
  *progressed = true;
  return AfterRecv(r, static_cast<size_t>(n));
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
                         r.done, r.payload.size() + kFrameHeaderBytes + r.trailer_bytes);
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

std::unique_ptr<Transport> MakeTcpTransport(int rank, std::vector<int> fds, const TcpOptions& options,
                                            std::vector<std::unique_ptr<SecureSession>> sessions) {
  return std::make_unique<TcpTransport>(rank, std::move(fds), options, std::move(sessions));
}

}  // namespace cohort::comm
