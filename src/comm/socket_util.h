// Small POSIX socket helpers shared by the TCP transport, its rendezvous and the benchmark:
// address parsing, socket options, and bounded full reads/writes on non-blocking sockets.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <span>
#include <string>

#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

// "host:port" (IPv4 literal or resolvable name) to a socket address.
Result<sockaddr_in> ParseAddress(const std::string& address);
std::string FormatAddress(const sockaddr_in& addr);

Status SetNonBlocking(int fd);
// TCP_NODELAY, and optionally SO_BUSY_POLL and fixed buffer sizes.
Status ConfigureStreamSocket(int fd, bool busy_poll, int buffer_bytes);

// Writes/reads all of `data` on a non-blocking socket, blocking in poll until the deadline.
Status WriteAll(int fd, std::span<const std::byte> data, Deadline deadline);
Status ReadAll(int fd, std::span<std::byte> data, Deadline deadline);

// Waits for `events` on fd until the deadline. kTimeout when it passes.
Status PollOne(int fd, short events, Deadline deadline);

// Milliseconds left until the deadline for poll(), rounded up, never negative.
int PollTimeoutMs(Deadline deadline);

// Closes fd if it is open and sets it to -1.
void CloseFd(int* fd);

}  // namespace cohort::comm
