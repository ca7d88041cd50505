// How N ranks find each other over TCP: bind, connect to lower ranks with retries, accept
// higher ranks, and exchange hellos so that a stray or garbage connection is refused. With a
// key, the secure handshake comes first and the hellos travel sealed: a connection that does
// not prove the secret is dropped before anything it says is looked at.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "comm/frame.h"
#include "comm/socket_util.h"
#include "comm/tcp_transport.h"

namespace cohort::comm {
namespace {

// A stray client gets this long to say hello before we drop it and go on accepting.
constexpr std::chrono::milliseconds kHelloTimeout{1000};
constexpr int kRanksMax = 1024;

// `session` null: in clear; else as one sealed record.
Status SendHello(int fd, SecureSession* session, const Hello& hello, Deadline deadline) {
  const HelloBytes bytes = EncodeHello(hello);
  if (session == nullptr) return WriteAll(fd, bytes, deadline);
  std::vector<std::byte> scratch;
  return WriteRecord(fd, *session, bytes, &scratch, deadline);
}

Result<Hello> ReadHello(int fd, SecureSession* session, Deadline deadline) {
  HelloBytes bytes{};
  if (session == nullptr) {
    COHORT_RETURN_IF_ERROR(ReadAll(fd, bytes, deadline));
    return DecodeHello(bytes);
  }
  std::vector<std::byte> buffer;
  COHORT_ASSIGN_OR_RETURN(const size_t n, ReadRecord(fd, *session, &buffer, kHelloBytes, deadline));
  if (n != kHelloBytes) return Corrupt("sealed hello of the wrong size");
  std::copy(buffer.begin(), buffer.begin() + kHelloBytes, bytes.begin());
  return DecodeHello(bytes);
}

// The secure session of a fresh connection when the options carry a key (else null).
Result<std::unique_ptr<SecureSession>> MaybeHandshake(int fd, HandshakeRole role, const TcpOptions& options,
                                                      Deadline deadline) {
  if (!options.key.has_value()) return std::unique_ptr<SecureSession>();
  return Handshake(fd, role, *options.key, deadline);
}

struct Connected {
  Fd fd;
  std::unique_ptr<SecureSession> session;
};

Result<Connected> ConnectToPeer(int peer, const TcpOptions& options, Deadline deadline) {
  COHORT_ASSIGN_OR_RETURN(const SocketAddress addr, SocketAddress::Parse(options.addresses[peer]));
  const int n = static_cast<int>(options.addresses.size());
  Status last = Unavailable("no attempt");
  while (Clock::now() < deadline) {
    // kUnavailable while the peer is not listening yet: peers start in any order.
    Result<Fd> fd = ConnectTcp(addr, deadline, options.socket_busy_poll, options.socket_buffer_bytes);
    if (fd.ok()) {
      auto session = MaybeHandshake(fd->get(), HandshakeRole::kClient, options, deadline);
      // A peer that does not prove our secret will not learn it by retrying.
      if (!session.ok() && session.status().code() == StatusCode::kCorrupt) {
        return session.status().Annotate(fmt::format("rank {} at {}", peer, options.addresses[peer]));
      }
      SecureSession* s = session.ok() ? session->get() : nullptr;
      Status status = session.ok() ? SendHello(fd->get(), s, {options.group_id, uint32_t(options.rank), uint32_t(n)},
                                               deadline)
                                   : session.status();
      Result<Hello> reply = status.ok() ? ReadHello(fd->get(), s, deadline) : Result<Hello>(status);
      if (reply.ok() && reply->group_id == options.group_id && reply->rank == uint32_t(peer) &&
          reply->n_ranks == uint32_t(n)) {
        return Connected{std::move(*fd), std::move(*session)};
      }
      last = reply.ok() ? Corrupt(fmt::format("{} answered as rank {} of group {:x}",
                                              options.addresses[peer], reply->rank,
                                              reply->group_id))
                        : reply.status();
      // A wrong answer will not fix itself; a timeout or reset may (the peer restarted).
      if (last.code() == StatusCode::kCorrupt) return last;
    } else {
      last = fd.status();
    }
    std::this_thread::sleep_for(options.retry_interval);
  }
  return Timeout(fmt::format("rank {}: could not connect to rank {} at {} within {} ms ({})",
                             options.rank, peer, options.addresses[peer],
                             options.connect_timeout.count(), last.message()));
}

// Accepts until every higher rank has said a valid hello; anything else is dropped.
Status AcceptPeers(int listen_fd, const TcpOptions& options, Deadline deadline, TcpMesh* mesh) {
  std::vector<int>* fds = &mesh->fds;
  const int n = static_cast<int>(options.addresses.size());
  int missing = n - 1 - options.rank;
  while (missing > 0) {
    Status ready = PollOne(listen_fd, POLLIN, deadline);
    if (!ready.ok()) {
      return Timeout(fmt::format("rank {}: {} higher rank(s) did not connect within {} ms",
                                 options.rank, missing, options.connect_timeout.count()));
    }
    Fd fd(accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (!fd.valid()) continue;  // EAGAIN or a connection reset before we took it
    Status status =
        ConfigureStreamSocket(fd.get(), options.socket_busy_poll, options.socket_buffer_bytes);
    const Deadline hello_deadline = std::min(deadline, DeadlineAfter(kHelloTimeout));
    auto session = status.ok() ? MaybeHandshake(fd.get(), HandshakeRole::kServer, options, hello_deadline)
                               : Result<std::unique_ptr<SecureSession>>(status);
    SecureSession* s = session.ok() ? session->get() : nullptr;
    Result<Hello> hello = session.ok() ? ReadHello(fd.get(), s, hello_deadline) : Result<Hello>(session.status());
    const bool valid = hello.ok() && hello->group_id == options.group_id &&
                       hello->n_ranks == uint32_t(n) && hello->rank > uint32_t(options.rank) &&
                       hello->rank < uint32_t(n) && (*fds)[hello->rank] < 0;
    if (!valid ||
        !SendHello(fd.get(), s, {options.group_id, uint32_t(options.rank), uint32_t(n)}, deadline).ok()) {
      continue;  // garbage, a stranger, or a duplicate: not one of ours; fd closes it
    }
    if (s != nullptr) mesh->sessions[hello->rank] = std::move(*session);
    (*fds)[hello->rank] = fd.Release();
    --missing;
  }
  return Status::Ok();
}

}  // namespace

Status TcpOptions::Validate() const {
  const int n = static_cast<int>(addresses.size());
  if (n < 1 || n > kRanksMax) return InvalidArgument(fmt::format("{} ranks is not 1..{}", n, kRanksMax));
  if (rank < 0 || rank >= n) return InvalidArgument(fmt::format("rank {} is not in 0..{}", rank, n - 1));
  for (const std::string& address : addresses) {
    COHORT_RETURN_IF_ERROR(ParseAddress(address).status());
  }
  if (connect_timeout.count() <= 0) return InvalidArgument("connect timeout must be positive");
  if (link.latency_us < 0 || link.bandwidth_bytes_per_s < 0) {
    return InvalidArgument("link emulation latency and bandwidth must not be negative");
  }
  return Status::Ok();
}

Result<std::unique_ptr<TcpListener>> TcpListener::Bind(const std::string& address) {
  COHORT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::Parse(address));
  COHORT_ASSIGN_OR_RETURN(Fd fd, ListenTcp(addr, kRanksMax));
  socklen_t len = sizeof(addr.addr);
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr.addr), &len);
  COHORT_RETURN_IF_ERROR(SetNonBlocking(fd.get()));
  return std::unique_ptr<TcpListener>(new TcpListener(std::move(fd), addr.ToString()));
}

Result<TcpMesh> ConnectTcpMeshSessions(const TcpOptions& options, std::unique_ptr<TcpListener> listener) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  const int n = static_cast<int>(options.addresses.size());
  const Deadline deadline = DeadlineAfter(options.connect_timeout);
  if (listener == nullptr && options.rank + 1 < n) {
    COHORT_ASSIGN_OR_RETURN(listener, TcpListener::Bind(options.addresses[options.rank]));
  }
  TcpMesh mesh;
  mesh.fds.assign(n, -1);
  if (options.key.has_value()) mesh.sessions.resize(n);
  auto close_all = [&mesh] {
    for (int& fd : mesh.fds) CloseFd(&fd);
  };
  for (int peer = 0; peer < options.rank; ++peer) {
    Result<Connected> c = ConnectToPeer(peer, options, deadline);
    if (!c.ok()) {
      close_all();
      return c.status();
    }
    mesh.fds[peer] = c->fd.Release();
    if (options.key.has_value()) mesh.sessions[peer] = std::move(c->session);
  }
  if (options.rank + 1 < n) {
    Status status = AcceptPeers(listener->fd(), options, deadline, &mesh);
    if (!status.ok()) {
      close_all();
      return status;
    }
  }
  return mesh;
}

Result<std::vector<int>> ConnectTcpMesh(const TcpOptions& options, std::unique_ptr<TcpListener> listener) {
  COHORT_ASSIGN_OR_RETURN(TcpMesh mesh, ConnectTcpMeshSessions(options, std::move(listener)));
  return std::move(mesh.fds);
}

Result<std::unique_ptr<Transport>> ConnectTcpGroup(const TcpOptions& options,
                                                   std::unique_ptr<TcpListener> listener) {
  COHORT_ASSIGN_OR_RETURN(TcpMesh mesh, ConnectTcpMeshSessions(options, std::move(listener)));
  return MakeTcpTransport(options.rank, std::move(mesh.fds), options, std::move(mesh.sessions));
}

}  // namespace cohort::comm
