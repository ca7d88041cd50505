// Thin POSIX socket helpers for the control plane: IPv4 addresses, UDP (unicast and
// multicast) and TCP with deadlines. Every wait is bounded; nothing here blocks forever.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::cluster {

struct SocketAddress {
  sockaddr_in addr{};
  std::string ToString() const;  // "10.0.0.1:7946"
  uint16_t port() const;
  bool IsAny() const;            // 0.0.0.0
  bool operator==(const SocketAddress& o) const;
  // "host:port"; host may be a name (resolved once, IPv4) or a dotted quad.
  static Result<SocketAddress> Parse(const std::string& text);
  // "a.b.c.d:port" only: never a name lookup (for addresses that arrive in messages).
  static Result<SocketAddress> ParseNumeric(const std::string& text);
};

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset();

 private:
  int fd_ = -1;
};

Result<Fd> BindUdp(const SocketAddress& addr);
// A socket receiving `group`:port on the interface that owns `interface_ip` (0.0.0.0: the
// default one). Several sockets on one host may bind the same group and port.
Result<Fd> BindMulticast(const SocketAddress& group, const SocketAddress& interface_ip);
// Sends multicast from `fd` out of `interface_ip` with TTL 1 (the LAN only), looped back so
// nodes on the same host hear each other.
Status SetMulticastSender(int fd, const SocketAddress& interface_ip);
Status SendTo(int fd, const SocketAddress& to, std::span<const uint8_t> bytes);
// One datagram; false when none arrived before timeout_ms. `buffer` bounds its size: a
// larger datagram is truncated and reported with *truncated.
bool RecvFrom(int fd, int timeout_ms, std::vector<uint8_t>* buffer, SocketAddress* from,
              bool* truncated);

Result<Fd> ListenTcp(const SocketAddress& addr, int backlog);
Result<Fd> ConnectTcp(const SocketAddress& to, int timeout_ms);
Status WriteAll(int fd, std::span<const uint8_t> bytes, uint64_t deadline_ms);
Status ReadExact(int fd, uint8_t* out, size_t n, uint64_t deadline_ms);
uint64_t SteadyMs();  // monotonic milliseconds, for deadlines

}  // namespace cohort::cluster
