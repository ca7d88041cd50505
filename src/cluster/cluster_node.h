// ClusterNode: one machine's membership in the cluster. It owns the control sockets and
// threads that discover peers (multicast beacons, --peers), send heartbeats, track liveness,
// follow or act as the leader of the agreed state, and measure the node and its links.
// Several can run in one process (tests); see docs/CLUSTER.md for the protocol.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster_state.h"
#include "cluster/discovery_watch.h"
#include "cluster/member_table.h"
#include "cluster/node_id.h"
#include "cluster/profile.h"
#include "cluster/wire.h"
#include "comm/socket_util.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/status.h"

namespace cohort::cluster {

struct ClusterOptions {
  std::string listen = "0.0.0.0:7946";  // UDP and TCP control port (the same number)
  std::string advertise;                // address peers should use; default: listen
  std::vector<std::string> peers;       // host:port of other nodes (unicast discovery)
  std::string secret;                   // the cluster secret (required)
  std::string state_dir;                // keeps the node id; empty: a fresh id each start
  std::string name;                     // default: the host name
  bool multicast = true;
  std::string multicast_group = "239.255.77.76:7947";
  int heartbeat_ms = 500;
  MemberTimeouts timeouts;
  uint64_t replay_window_ms = 30000;    // clocks of the nodes must agree this closely
  size_t max_members = 64;
  int max_packets_per_s = 4000;         // received datagrams beyond this are dropped
  int ping_interval_ms = 1000;
  int probe_interval_ms = 30000;        // link bandwidth probes; 0: never
  size_t probe_bytes = size_t{4} << 20;
  int tcp_timeout_ms = 3000;            // a control connection's whole life
  int max_pending_connections = 16;
  // After this long, --peers that never answered and a node still alone are warned about.
  int discovery_warn_ms = 10000;
  ProfileOptions profile;
  // Borrowed; never null. What liveness (silence timeouts), the ping and probe schedules and
  // message timestamps read. A test injects a ManualClock to move time by hand; the threads
  // still wake, and sockets still wait, in real time.
  const Clock* clock = &Clock::Real();
  Status Validate() const;
};

// Why a packet or connection was dropped. Counters are kept per reason.
enum class DropReason {
  kMalformed,    // not our framing (magic, version, type, lengths)
  kBadMac,       // framing fine, authentication failed (wrong secret or tampering)
  kStale,        // timestamp outside the replay window
  kReplay,       // (sender, nonce) already seen
  kReplayFull,   // the replay guard is at its bound
  kRateLimited,  // over max_packets_per_s
  kTooLarge,     // bigger than the largest control message
  kBadPayload,   // authentic, but the JSON does not make sense
  kTableFull,    // a new member while the table is full of live ones
  kConnections,  // TCP connection refused: too many pending
  kCount,
};
inline constexpr size_t kDropReasonCount = static_cast<size_t>(DropReason::kCount);
const char* DropReasonName(DropReason r);

struct Counters {
  std::array<uint64_t, kDropReasonCount> dropped{};
  uint64_t accepted = 0;  // authentic messages acted on
  uint64_t sent = 0;
  uint64_t dropped_total() const;
};

struct MemberView {
  NodeId id;
  std::string name;
  std::string address;
  Liveness liveness = Liveness::kAlive;
  bool is_self = false;
  uint64_t silent_ms = 0;  // since its last heartbeat (0 for self)
  ResourceProfile profile;
  std::vector<LinkMeasurement> links;
};

struct ClusterSnapshot {
  NodeId self;
  NodeId leader;  // this node's view: the lowest live id
  std::vector<MemberView> members;  // self first, then by id
  ClusterState state;               // the agreed state this node holds
  Counters counters;
};
nlohmann::json SnapshotToJson(const ClusterSnapshot& snapshot);

// The planner's input from what the cluster measured: one NodeProfile per alive member (self
// first) and, as the single link, the slowest measured link between two alive members (the
// highest latency and the lowest bandwidth seen, so a plan never counts on a better link
// than the worst one it may use). Fails while some member has not finished measuring.
Result<plan::ClusterSpec> MeasuredClusterSpec(const ClusterSnapshot& snapshot, const plan::StackProfile& stack);

struct ClusterCallbacks {
  // Called from the node's threads, never with its lock held; must not block for long.
  std::function<void(const MemberChange&)> on_member;
  std::function<void(const ClusterState&)> on_state;  // a new agreed state was adopted
};

class ClusterNode {
 public:
  // Binds the sockets, loads the id and starts the threads. `log` is borrowed.
  static Result<std::unique_ptr<ClusterNode>> Start(const ClusterOptions& options, Logger* log,
                                                    ClusterCallbacks callbacks = {});
  ~ClusterNode();
  ClusterNode(const ClusterNode&) = delete;
  ClusterNode& operator=(const ClusterNode&) = delete;

  // Stops the threads and closes the sockets; peers then see this node fall silent.
  void Stop();

  const NodeId& id() const { return id_; }
  // The clock its liveness reads (ClusterOptions::clock); the reconcile loop keeps time by it too.
  const Clock& clock() const { return *clock_; }
  std::string address() const { return advertise_.ToString(); }
  ClusterSnapshot Snapshot() const;
  // Orders `change` through the leader (this node or, over TCP, the current one) and returns
  // the state version that holds it. Retries while leadership moves, until timeout_ms.
  Result<uint64_t> ProposeChange(const Change& change, int timeout_ms = 5000);
  // Waits until the state this node holds satisfies `ready` (e.g. reaches a version another
  // node's proposal returned); false on timeout or Stop. `ready` runs under the node's lock.
  bool WaitForState(const std::function<bool(const ClusterState&)>& ready, int timeout_ms);
  // Snapshot, ProposeChange and WaitForState may be called from any thread, but not
  // concurrently with Stop or destruction.

 private:
  ClusterNode() = default;
  struct Outgoing {
    comm::SocketAddress to;
    std::vector<uint8_t> bytes;
  };

  // Threads.
  void ReceiveLoop();
  void TickLoop();
  void AcceptLoop();
  void ConnectionLoop();
  void ProfileLoop();

  // UDP.
  void HandleDatagram(std::span<const uint8_t> bytes, const comm::SocketAddress& from, bool truncated);
  // Decode, MAC, replay; `from` names the sender in the warning a wrong secret gets.
  bool Admit(std::span<const uint8_t> bytes, const std::string& from, Message* message);
  void HandleHeartbeat(const Message& m, const nlohmann::json& j, const comm::SocketAddress& from,
                       std::vector<Outgoing>* out, std::vector<MemberChange>* changes);
  void HandleState(const nlohmann::json& j, std::vector<Outgoing>* out, bool* adopted);
  void Tick(std::vector<Outgoing>* out, std::vector<MemberChange>* changes, bool* state_changed);
  void WarnAboutDiscovery();  // DiscoveryWatch's due warnings, logged

  // Leader duties; mutex_ held.
  bool UpdateLeadershipLocked();
  void BroadcastStateLocked(std::vector<Outgoing>* out);
  std::vector<uint8_t> EncodeLocked(MessageType type, const nlohmann::json& payload);
  nlohmann::json HeartbeatPayloadLocked() const;

  // TCP.
  void HandleConnection(comm::Fd fd);
  Result<Message> Request(const comm::SocketAddress& to, MessageType type, const nlohmann::json& payload,
                          size_t raw_bytes_after, MessageType reply_type, int timeout_ms);
  Result<uint64_t> ProposeLocal(const Change& change);
  void ProbeBandwidth(const NodeId& peer, const comm::SocketAddress& to);

  void Send(const std::vector<Outgoing>& out);
  void Notify(const std::vector<MemberChange>& changes, bool state_changed);
  void Drop(DropReason r) { dropped_[static_cast<size_t>(r)].fetch_add(1); }

  ClusterOptions options_;
  const Clock* clock_ = nullptr;  // options_.clock
  Logger* log_ = nullptr;
  ClusterCallbacks callbacks_;
  NodeId id_;
  ClusterKey key_{};
  comm::SocketAddress listen_;
  comm::SocketAddress advertise_;
  comm::SocketAddress multicast_group_;
  std::vector<comm::SocketAddress> seeds_;
  uint64_t boot_ms_ = 0;
  comm::Fd udp_;
  comm::Fd multicast_;
  comm::Fd tcp_;

  std::atomic<bool> stop_{false};
  std::thread receive_thread_, tick_thread_, accept_thread_, profile_thread_;
  std::vector<std::thread> connection_threads_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable state_cv_;  // signalled (with mutex_) when state_ changes
  std::unique_ptr<MemberTable> table_;
  ClusterState state_;
  uint64_t max_term_seen_ = 0;
  bool was_leader_ = false;
  ResourceProfile profile_;
  std::map<NodeId, LinkMeasurement> links_;
  static constexpr size_t kLatencySamples = 16;
  std::map<NodeId, std::deque<double>> latency_samples_;  // one-way seconds, newest last
  std::unique_ptr<ReplayGuard> replay_;
  std::unique_ptr<DiscoveryWatch> watch_;  // has its own lock
  double tokens_ = 0;             // rate limiter bucket
  uint64_t tokens_at_ms_ = 0;     // real monotonic ms (the bucket bounds work per real second)
  uint64_t tick_count_ = 0;
  uint64_t last_ping_ms_ = 0;

  std::mutex connections_mutex_;
  std::condition_variable connections_cv_;
  std::deque<comm::Fd> connections_;

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;

  std::array<std::atomic<uint64_t>, kDropReasonCount> dropped_{};
  std::atomic<uint64_t> accepted_{0};
  std::atomic<uint64_t> sent_{0};
};

}  // namespace cohort::cluster
