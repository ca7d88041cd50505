// POSIX socket helpers: address parsing, UDP unicast/multicast, TCP with deadlines.
#include "cluster/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace cohort::cluster {
namespace {

Status Errno(const std::string& what) { return IoError(what + ": " + std::strerror(errno)); }

Status SetInt(int fd, int level, int option, int value, const char* name) {
  if (::setsockopt(fd, level, option, &value, sizeof(value)) != 0) return Errno(name);
  return Status::Ok();
}

// Waits for `events` on fd until deadline; false on timeout.
bool WaitFd(int fd, short events, uint64_t deadline_ms) {
  for (;;) {
    const uint64_t now = SteadyMs();
    if (now >= deadline_ms) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<uint64_t>(deadline_ms - now, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

}  // namespace

uint64_t SteadyMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::string SocketAddress::ToString() const {
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(port());
}

uint16_t SocketAddress::port() const { return ntohs(addr.sin_port); }
bool SocketAddress::IsAny() const { return addr.sin_addr.s_addr == htonl(INADDR_ANY); }
bool SocketAddress::operator==(const SocketAddress& o) const {
  return addr.sin_addr.s_addr == o.addr.sin_addr.s_addr && addr.sin_port == o.addr.sin_port;
}

Result<SocketAddress> SocketAddress::Parse(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    return InvalidArgument("address '" + text + "' is not host:port");
  }
  const std::string host = text.substr(0, colon);
  const std::string port_text = text.substr(colon + 1);
  char* end = nullptr;
  const long port = std::strtol(port_text.c_str(), &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return InvalidArgument("bad port in '" + text + "'");
  SocketAddress out;
  out.addr.sin_family = AF_INET;
  out.addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &out.addr.sin_addr) == 1) return out;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) {
    return NotFound("cannot resolve host '" + host + "'");
  }
  out.addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  ::freeaddrinfo(found);
  return out;
}

Result<SocketAddress> SocketAddress::ParseNumeric(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || text.find_first_not_of("0123456789.:") != std::string::npos) {
    return InvalidArgument("address '" + text + "' is not a.b.c.d:port");
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

void Fd::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Fd> BindUdp(const SocketAddress& addr) {
  Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  // Room for a burst (full states to many peers at once); the kernel caps it at rmem_max.
  (void)SetInt(fd.get(), SOL_SOCKET, SO_RCVBUF, 1 << 20, "SO_RCVBUF");
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), sizeof(addr.addr)) != 0) {
    return Errno("bind udp " + addr.ToString());
  }
  return fd;
}

Result<Fd> BindMulticast(const SocketAddress& group, const SocketAddress& interface_ip) {
  Fd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  COHORT_RETURN_IF_ERROR(SetInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  // Binding the group address (not INADDR_ANY) keeps unrelated traffic to the port out.
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&group.addr), sizeof(group.addr)) != 0) {
    return Errno("bind multicast " + group.ToString());
  }
  ip_mreq mreq{};
  mreq.imr_multiaddr = group.addr.sin_addr;
  mreq.imr_interface = interface_ip.addr.sin_addr;
  if (::setsockopt(fd.get(), IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof(mreq)) != 0) {
    return Errno("join multicast group " + group.ToString());
  }
  return fd;
}

Status SetMulticastSender(int fd, const SocketAddress& interface_ip) {
  COHORT_RETURN_IF_ERROR(SetInt(fd, IPPROTO_IP, IP_MULTICAST_TTL, 1, "IP_MULTICAST_TTL"));
  COHORT_RETURN_IF_ERROR(SetInt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1, "IP_MULTICAST_LOOP"));
  if (!interface_ip.IsAny()) {
    in_addr ifaddr = interface_ip.addr.sin_addr;
    if (::setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &ifaddr, sizeof(ifaddr)) != 0) {
      return Errno("IP_MULTICAST_IF");
    }
  }
  return Status::Ok();
}

Status SendTo(int fd, const SocketAddress& to, std::span<const uint8_t> bytes) {
  const ssize_t n = ::sendto(fd, bytes.data(), bytes.size(), MSG_DONTWAIT,
                             reinterpret_cast<const sockaddr*>(&to.addr), sizeof(to.addr));
  if (n != static_cast<ssize_t>(bytes.size())) return Errno("sendto " + to.ToString());
  return Status::Ok();
}

bool RecvFrom(int fd, int timeout_ms, std::vector<uint8_t>* buffer, SocketAddress* from,
              bool* truncated) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return false;
  socklen_t len = sizeof(from->addr);
  // MSG_TRUNC makes recvfrom return the datagram's real size, so oversize ones are seen.
  const ssize_t n = ::recvfrom(fd, buffer->data(), buffer->size(), MSG_DONTWAIT | MSG_TRUNC,
                               reinterpret_cast<sockaddr*>(&from->addr), &len);
  if (n < 0) return false;
  *truncated = static_cast<size_t>(n) > buffer->size();
  buffer->resize(std::min(static_cast<size_t>(n), buffer->size()));
  return true;
}

Result<Fd> ListenTcp(const SocketAddress& addr, int backlog) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  COHORT_RETURN_IF_ERROR(SetInt(fd.get(), SOL_SOCKET, SO_REUSEADDR, 1, "SO_REUSEADDR"));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr.addr), sizeof(addr.addr)) != 0) {
    return Errno("bind tcp " + addr.ToString());
  }
  if (::listen(fd.get(), backlog) != 0) return Errno("listen");
  return fd;
}

Result<Fd> ConnectTcp(const SocketAddress& to, int timeout_ms) {
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return Errno("socket");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&to.addr), sizeof(to.addr)) != 0 &&
      errno != EINPROGRESS) {
    return Errno("connect " + to.ToString());
  }
  if (!WaitFd(fd.get(), POLLOUT, SteadyMs() + static_cast<uint64_t>(timeout_ms))) {
    return Timeout("connect " + to.ToString() + " timed out");
  }
  int err = 0;
  socklen_t len = sizeof(err);
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return IoError("connect " + to.ToString() + ": " + std::strerror(err));
  (void)SetInt(fd.get(), IPPROTO_TCP, 1 /* TCP_NODELAY */, 1, "TCP_NODELAY");
  return fd;
}

Status WriteAll(int fd, std::span<const uint8_t> bytes, uint64_t deadline_ms) {
  size_t done = 0;
  while (done < bytes.size()) {
    if (!WaitFd(fd, POLLOUT, deadline_ms)) return Timeout("write timed out");
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return Errno("send");
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status ReadExact(int fd, uint8_t* out, size_t n, uint64_t deadline_ms) {
  size_t done = 0;
  while (done < n) {
    if (!WaitFd(fd, POLLIN, deadline_ms)) return Timeout("read timed out");
    const ssize_t r = ::recv(fd, out + done, n - done, MSG_DONTWAIT);
    if (r == 0) return Unavailable("connection closed");
    if (r < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return Errno("recv");
    }
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace cohort::cluster
