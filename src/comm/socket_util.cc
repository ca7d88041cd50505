// POSIX socket helpers (see socket_util.h).
#include "comm/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cohort::comm {
namespace {

Status Errno(const std::string& what) { return IoError(fmt::format("{}: {}", what, std::strerror(errno))); }

Status SetInt(int fd, int level, int option, int value, const char* name) {
  if (setsockopt(fd, level, option, &value, sizeof(value)) != 0) return Errno(name);
  return Status::Ok();
}

}  // namespace

Result<sockaddr_in> ParseAddress(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) {
    return InvalidArgument(fmt::format("address '{}' is not host:port", address));
  }
  const std::string host = address.substr(0, colon);
  const std::string port_text = address.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("address '{}' has a bad port", address));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1) return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return NotFound(fmt::format("cannot resolve host '{}'", host));
  }
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return addr;
}

std::string FormatAddress(const sockaddr_in& addr) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr.sin_addr, text, sizeof(text));
  return fmt::format("{}:{}", text, ntohs(addr.sin_port));
}

std::string SocketAddress::ToString() const { return FormatAddress(addr); }
uint16_t SocketAddress::port() const { return ntohs(addr.sin_port); }
bool SocketAddress::IsAny() const { return addr.sin_addr.s_addr == htonl(INADDR_ANY); }
bool SocketAddress::operator==(const SocketAddress& o) const {
  return addr.sin_addr.s_addr == o.addr.sin_addr.s_addr && addr.sin_port == o.addr.sin_port;
}

Result<SocketAddress> SocketAddress::Parse(const std::string& text) {
  COHORT_ASSIGN_OR_RETURN(const sockaddr_in addr, ParseAddress(text));
  SocketAddress out;
  out.addr = addr;
  return out;
}

Result<SocketAddress> SocketAddress::ParseNumeric(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || text.find_first_not_of("0123456789.:") != std::string::npos) {
    return InvalidArgument(fmt::format("address '{}' is not a.b.c.d:port", text));
  }
  return Parse(text);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    Reset();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

int Fd::Release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::Reset() { CloseFd(&fd_); }

Status SetNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return IoError(fmt::format("fcntl(O_NONBLOCK): {}", std::strerror(errno)));
  }
  return Status::Ok();
}

Status ConfigureStreamSocket(int fd, bool busy_poll, int buffer_bytes) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
    return IoError(fmt::format("setsockopt(TCP_NODELAY): {}", std::strerror(errno)));
  }
  if (busy_poll) {
    const int busy_us = 50;
    // Best effort: unprivileged processes or old kernels may refuse; latency is then as usual.
    (void)setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &busy_us, sizeof(busy_us));
  }
  if (buffer_bytes > 0) {
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof(buffer_bytes));
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer_bytes, sizeof(buffer_bytes));
  }
  return SetNonBlocking(fd);
}

int PollTimeoutMs(Deadline deadline) {
  const auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

Status PollOne(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int timeout_ms = PollTimeoutMs(deadline);
    const int n = poll(&p, 1, timeout_ms);
    if (n > 0) return Status::Ok();  // readiness or an error: the next syscall tells which
    if (n < 0 && errno != EINTR) return IoError(fmt::format("poll: {}", std::strerror(errno)));
    if (n == 0 && Clock::now() >= deadline) return Timeout("socket wait timed out");
  }
}

Status WriteAll(int fd, std::span<const std::byte> data, Deadline deadline) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      COHORT_RETURN_IF_ERROR(PollOne(fd, POLLOUT, deadline));
    } else {
      return Unavailable(fmt::format("send: {}", std::strerror(errno)));
    }
  }
  return Status::Ok();
}

Status ReadAll(int fd, std::span<std::byte> data, Deadline deadline) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = recv(fd, data.data() + done, data.size() - done, MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n == 0) {
      return Unavailable("peer closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
      COHORT_RETURN_IF_ERROR(PollOne(fd, POLLIN, deadline));
    } else {
      return Unavailable(fmt::format("recv: {}", std::strerror(errno)));
    }
  }
  return Status::Ok();
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

Result<Fd> ListenTcp(const SocketAddress& addr, int backlog) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  COHORT_RETURN_IF_ERROR(SetInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), sizeof(addr.addr)) != 0) {
    return Errno("bind tcp " + addr.ToString());
  }
  if (listen(fd.get(), backlog) != 0) return Errno("listen on " + addr.ToString());
  return fd;
}

Result<Fd> ConnectTcp(const SocketAddress& to, Deadline deadline, bool busy_poll, int buffer_bytes) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  // Buffer sizes are set before connect, so the window scale agreed at the handshake fits them.
  COHORT_RETURN_IF_ERROR(ConfigureStreamSocket(fd.get(), busy_poll, buffer_bytes));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), sizeof(to.addr)) != 0) {
    if (errno != EINPROGRESS) {
      return Unavailable(fmt::format("connect {}: {}", to.ToString(), std::strerror(errno)));
    }
    Status ready = PollOne(fd.get(), POLLOUT, deadline);
    if (ready.code() == StatusCode::kTimeout) return Timeout(fmt::format("connect {} timed out", to.ToString()));
    COHORT_RETURN_IF_ERROR(ready);
    int error = 0;
    socklen_t len = sizeof(error);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &len) != 0) return Errno("getsockopt(SO_ERROR)");
    if (error != 0) return Unavailable(fmt::format("connect {}: {}", to.ToString(), std::strerror(error)));
  }
  return fd;
}

Result<Fd> BindUdp(const SocketAddress& addr) {
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  // Room for a burst (full states to many peers at once); the kernel caps it at rmem_max.
  (void)SetInt(fd.get(), SOL_SOCKET, SO_RCVBUF, 1 << 20, "SO_RCVBUF");
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), sizeof(addr.addr)) != 0) {
    return Errno("bind udp " + addr.ToString());
  }
  return fd;
}

Result<Fd> BindMulticast(const SocketAddress& group, const SocketAddress& interface_ip) {
  Fd fd(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  COHORT_RETURN_IF_ERROR(SetInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  // Binding the group address (not INADDR_ANY) keeps unrelated traffic to the port out.
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&group.addr), sizeof(group.addr)) != 0) {
    return Errno("bind multicast " + group.ToString());
  }
  ip_mreq mreq{};
  mreq.imr_multiaddr = group.addr.sin_addr;
  mreq.imr_interface = interface_ip.addr.sin_addr;
  if (setsockopt(fd.get(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0) {
    return Errno("join multicast group " + group.ToString());
  }
  return fd;
}

Status SetMulticastSender(int fd, const SocketAddress& interface_ip) {
  COHORT_RETURN_IF_ERROR(SetInt(fd, IPPROTO_IP, IP_MULTICAST_TTL, 1, "IP_MULTICAST_TTL"));
  COHORT_RETURN_IF_ERROR(SetInt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1, "IP_MULTICAST_LOOP"));
  if (!interface_ip.IsAny()) {
    in_addr ifaddr = interface_ip.addr.sin_addr;
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof(ifaddr)) != 0) {
      return Errno("IP_MULTICAST_IF");
    }
  }
  return Status::Ok();
}

Status SendTo(int fd, const SocketAddress& to, std::span<const uint8_t> bytes) {
  const ssize_t n = sendto(fd, bytes.data(), bytes.size(), MSG_DONTWAIT,
                           reinterpret_cast<const sockaddr*>(&to.addr), sizeof(to.addr));
  if (n != static_cast<ssize_t>(bytes.size())) return Errno("sendto " + to.ToString());
  return Status::Ok();
}

bool RecvFrom(int fd, int timeout_ms, std::vector<uint8_t>* buffer, SocketAddress* from,
              bool* truncated) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, timeout_ms) <= 0) return false;
  socklen_t len = sizeof(from->addr);
  // MSG_TRUNC makes recvfrom return the datagram's real size, so oversize ones are seen.
  const ssize_t n = recvfrom(fd, buffer->data(), buffer->size(), MSG_DONTWAIT | MSG_TRUNC,
                             reinterpret_cast<sockaddr*>(&from->addr), &len);
  if (n < 0) return false;
  *truncated = static_cast<size_t>(n) > buffer->size();
  buffer->resize(std::min(static_cast<size_t>(n), buffer->size()));
  return true;
}

}  // namespace cohort::comm
