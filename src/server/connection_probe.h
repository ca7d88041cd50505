// ConnectionProbe: tells a request handler whether its HTTP client has hung up, by polling the
// connection's socket. cpp-httplib 0.11 gives a plain (non-streaming) handler no signal for
// that, so a generation whose client is gone would otherwise run to its end.
#pragma once

#include <string>

namespace cohort::server {

// The four numbers that name one TCP connection, as cpp-httplib reports them in a Request.
struct ConnectionAddress {
  std::string local_addr;
  int local_port = -1;
  std::string remote_addr;
  int remote_port = -1;
};

class ConnectionProbe {
 public:
  // Finds this process's socket whose local and peer addresses are `address`. The handler
  // thread serves that connection until it returns, so the descriptor stays the same socket
  // for the handler's whole life. When none matches (or /proc is missing), `found()` is false
  // and `ClientGone()` always answers false: the generation then runs to its end, as before.
  static ConnectionProbe Find(const ConnectionAddress& address);

  bool found() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // True once the peer has closed or reset the connection (a FIN, RST or socket error).
  // A client that half-closes after sending its request counts as gone, as in newer
  // cpp-httplib's is_socket_alive: HTTP clients do not do that, and a killed one must be seen.
  // Never blocks.
  bool ClientGone() const;

 private:
  explicit ConnectionProbe(int fd) : fd_(fd) {}
  int fd_ = -1;  // borrowed: cpp-httplib owns and closes it
};

}  // namespace cohort::server
