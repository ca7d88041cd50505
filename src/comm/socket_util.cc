// POSIX socket helpers (see socket_util.h).
#include "comm/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace cohort::comm {

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

}  // namespace cohort::comm
