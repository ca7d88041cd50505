// The TCP transport: a full mesh of persistent TCP connections between N ranks (rank i
// listens on addresses[i]), TCP_NODELAY, non-blocking sockets driven by one Exchange loop,
// and an optional link emulation that delays delivery to imitate a slower network. With a
// cluster key, every connection opens with the secure handshake and carries sealed frames
// (secure_channel.h); without one, plain frames (loopback, or an explicit --insecure).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/secure_channel.h"
#include "comm/socket_util.h"
#include "comm/transport.h"
#include "core/status.h"

namespace cohort::comm {

// Imitates a slower link on the sending side: every frame is held until
// send time + serialisation time at `bandwidth_bytes_per_s` (frames to one peer queue behind
// each other, like on a wire) + `latency_us`, and only then written to the socket. It exists
// because the test machines' kernel has no netem: with it, one host can check how a layout
// behaves on, say, 1 Gb/s with 100 µs one-way delay. A round trip costs at least 2 × latency.
// Sends become copies into a queue drained by one extra thread, so it is for tests and
// what-if measurements, not production.
struct LinkEmulation {
  int64_t latency_us = 0;             // added one-way delay; 0 = none
  int64_t bandwidth_bytes_per_s = 0;  // cap per peer link; 0 = unlimited
  bool enabled() const { return latency_us > 0 || bandwidth_bytes_per_s > 0; }
};

struct TcpOptions {
  int rank = 0;
  std::vector<std::string> addresses;  // "host:port" per rank; IPv4 literals or host names
  uint64_t group_id = 0;               // peers of another group are refused at hello
  std::chrono::milliseconds connect_timeout{10000};  // the whole rendezvous, retries included
  std::chrono::milliseconds retry_interval{20};      // between connect attempts to a peer
  // Blocking in recv() at once is fastest for one exchange alone (21 µs vs 30 µs per 16 KB on
  // loopback), but a whole model step pays an idle CPU's wake-up at every late peer: see
  // WaitPolicy for the end-to-end figures that chose yielding first.
  WaitPolicy wait;
  bool socket_busy_poll = false;  // also ask the kernel to busy-poll the NIC (SO_BUSY_POLL)
  int socket_buffer_bytes = 0;    // SO_SNDBUF/SO_RCVBUF; 0 keeps the kernel's autotuning
  LinkEmulation link;
  // Set: each connection is authenticated with this key and its frames encrypted; a peer
  // without it is refused at the handshake. Unset: plain TCP.
  std::optional<ChannelKey> key;

  Status Validate() const;
};

// A bound, listening socket. Binding before the group connects lets a test (or a launcher)
// ask for port 0 and learn the real address to hand to the other ranks.
class TcpListener {
 public:
  static Result<std::unique_ptr<TcpListener>> Bind(const std::string& address);
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;

  const std::string& address() const { return address_; }  // with the real port
  int fd() const { return fd_.get(); }

 private:
  TcpListener(Fd fd, std::string address) : fd_(std::move(fd)), address_(std::move(address)) {}
  Fd fd_;
  std::string address_;
};

// Builds the mesh: rank i connects to every lower rank (retrying until the connect timeout,
// since peers start in any order) and accepts every higher one. Both sides check each other's
// hello; a connection that says anything else (garbage, another group, a duplicate rank) is
// dropped and the rendezvous goes on. `listener` may be null: then addresses[rank] is bound.
Result<std::unique_ptr<Transport>> ConnectTcpGroup(const TcpOptions& options,
                                                   std::unique_ptr<TcpListener> listener = nullptr);

// The rendezvous alone: the connected, hello-checked sockets (fds[rank] == -1), owned by the
// caller, and with a key each one's secure session (sessions[rank] null; empty without a key).
struct TcpMesh {
  std::vector<int> fds;
  std::vector<std::unique_ptr<SecureSession>> sessions;
};
Result<TcpMesh> ConnectTcpMeshSessions(const TcpOptions& options, std::unique_ptr<TcpListener> listener = nullptr);
// The sockets only. Other transports (UCX) use it to bootstrap and to watch their peers'
// liveness (with a key the bootstrap is authenticated, but their own data is not encrypted).
Result<std::vector<int>> ConnectTcpMesh(const TcpOptions& options,
                                        std::unique_ptr<TcpListener> listener = nullptr);

// Wraps already-connected sockets (fds[rank] == -1) in a transport; the transport owns them.
// `sessions` (one per fd, or empty for plain frames) are the handshakes' outcomes.
std::unique_ptr<Transport> MakeTcpTransport(int rank, std::vector<int> fds, const TcpOptions& options,
                                            std::vector<std::unique_ptr<SecureSession>> sessions = {});

}  // namespace cohort::comm
