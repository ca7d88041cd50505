// Finds a connection's socket among this process's descriptors by its addresses, and polls it
// for a hang-up without reading anything the HTTP layer would need.
#include "server/connection_probe.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cerrno>
#include <cstdlib>

namespace cohort::server {
namespace {

// The numeric host and the port of a socket address, the way cpp-httplib fills a Request
// (getnameinfo with NI_NUMERICHOST), so the strings compare equal.
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  host = buf;
  if (addr.ss_family == AF_INET) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  return true;
}

bool Matches(int fd, const ConnectionAddress& want) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  // The peer first: every connection of the server shares the local address, and a listener
  // has no peer.
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!HostAndPort(addr, len, host, port) || port != want.remote_port) return false;
  if (!want.remote_addr.empty() && host != want.remote_addr) return false;
  len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!HostAndPort(addr, len, host, port) || port != want.local_port) return false;
  return want.local_addr.empty() || host == want.local_addr;
}

}  // namespace

ConnectionProbe ConnectionProbe::Find(const ConnectionAddress& address) {
  if (address.local_port <= 0 || address.remote_port <= 0) return ConnectionProbe(-1);
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return ConnectionProbe(-1);
  int found = -1;
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (Matches(static_cast<int>(fd), address)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return ConnectionProbe(found);
}

bool ConnectionProbe::ClientGone() const {
  if (fd_ < 0) return false;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return false;  // nothing happened (or EINTR: ask again next time)
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0) return true;
  if ((p.revents & POLLIN) == 0) return false;
  // Readable without a hang-up flag: either pipelined bytes of the next request (alive) or an
  // end of stream the flags did not report. A peek leaves the bytes for cpp-httplib.
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n > 0) return false;
  if (n == 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace cohort::server
