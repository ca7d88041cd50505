// The one POSIX socket layer, shared by comm (the TCP transport, its rendezvous, the benchmark)
// and the cluster's control plane: IPv4 addresses, an owning Fd, socket options, UDP unicast
// and multicast, and TCP listen/connect/read/write bounded by a Deadline. Every wait is
// bounded; nothing here blocks forever.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

// "host:port" (IPv4 literal or resolvable name) to a socket address.
Result<sockaddr_in> ParseAddress(const std::string& address);
std::string FormatAddress(const sockaddr_in& addr);

// An IPv4 address as a value: what the control plane keeps, compares and prints.
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

// Owns a file descriptor: closes it when destroyed or reset.
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
  // Gives the descriptor up to the caller, who must close it.
  int Release();
  void Reset();

 private:
  int fd_ = -1;
};

Status SetNonBlocking(int fd);
// TCP_NODELAY, and optionally SO_BUSY_POLL and fixed buffer sizes; leaves fd non-blocking.
Status ConfigureStreamSocket(int fd, bool busy_poll, int buffer_bytes);

// Writes/reads all of `data` on a non-blocking socket, blocking in poll until the deadline.
Status WriteAll(int fd, std::span<const std::byte> data, Deadline deadline);
Status ReadAll(int fd, std::span<std::byte> data, Deadline deadline);

// Waits for `events` on fd until the deadline. kTimeout when it passes.
Status PollOne(int fd, short events, Deadline deadline);

// Milliseconds left until the deadline for poll(), rounded up, never negative.
int PollTimeoutMs(Deadline deadline);

// Closes fd if it is open and sets it to -1 (for descriptors kept as plain ints).
void CloseFd(int* fd);

// A TCP socket bound to `addr` (SO_REUSEADDR) and listening.
Result<Fd> ListenTcp(const SocketAddress& addr, int backlog);
// A connected, non-blocking TCP socket configured as ConfigureStreamSocket says.
// kUnavailable when nobody listens at `to`, kTimeout when the deadline passes first.
Result<Fd> ConnectTcp(const SocketAddress& to, Deadline deadline, bool busy_poll = false,
                      int buffer_bytes = 0);

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

}  // namespace cohort::comm
