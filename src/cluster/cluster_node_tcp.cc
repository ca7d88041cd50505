// ClusterNode's TCP side: proposals forwarded to the leader and link bandwidth probes, each a
// short connection carrying one authenticated request and one reply; and the profile thread.
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "cluster/cluster_node.h"

namespace cohort::cluster {

using comm::Fd;
using comm::SocketAddress;

namespace {

constexpr size_t kMaxProbeBytes = size_t{64} << 20;

// "ip:port" of a connection's other end, for warnings.
std::string PeerName(int fd) {
  comm::SocketAddress peer;
  socklen_t len = sizeof(peer.addr);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer.addr), &len) != 0) return "an unknown address";
  return peer.ToString();
}

// Socket waits are bounded in real time: they block a thread, which only real time releases.
comm::Deadline AfterMs(uint64_t ms) { return comm::DeadlineAfter(std::chrono::milliseconds(ms)); }

Status ReadExact(int fd, uint8_t* out, size_t n, comm::Deadline deadline) {
  return comm::ReadAll(fd, std::as_writable_bytes(std::span(out, n)), deadline);
}

Status WriteAll(int fd, std::span<const uint8_t> bytes, comm::Deadline deadline) {
  return comm::WriteAll(fd, std::as_bytes(bytes), deadline);
}

}  // namespace

void ClusterNode::AcceptLoop() {
  while (!stop_.load()) {
    pollfd p{tcp_.get(), POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    Fd fd(::accept4(tcp_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) continue;
    std::lock_guard<std::mutex> lock(connections_mutex_);
    if (connections_.size() >= static_cast<size_t>(options_.max_pending_connections)) {
      Drop(DropReason::kConnections);  // closed by fd's destructor
      continue;
    }
    connections_.push_back(std::move(fd));
    connections_cv_.notify_one();
  }
}

void ClusterNode::ConnectionLoop() {
  for (;;) {
    Fd fd;
    {
      std::unique_lock<std::mutex> lock(connections_mutex_);
      connections_cv_.wait(lock, [&] { return stop_.load() || !connections_.empty(); });
      if (stop_.load()) return;
      fd = std::move(connections_.front());
      connections_.pop_front();
    }
    HandleConnection(std::move(fd));
  }
}

// One request per connection; every read is bounded by the connection's deadline, so a
// silent or slow peer costs at most tcp_timeout_ms of one handler thread.
void ClusterNode::HandleConnection(Fd fd) {
  const comm::Deadline deadline = AfterMs(static_cast<uint64_t>(options_.tcp_timeout_ms));
  std::vector<uint8_t> bytes(kWireHeaderBytes);
  if (!ReadExact(fd.get(), bytes.data(), bytes.size(), deadline).ok()) {
    Drop(DropReason::kMalformed);
    return;
  }
  const size_t payload = PeekPayloadBytes(bytes);
  if (payload == 0 && std::string_view(reinterpret_cast<const char*>(bytes.data()), 4) != "CHCP") {
    Drop(DropReason::kMalformed);
    return;
  }
  if (payload > kMaxPayloadBytes) {
    Drop(DropReason::kTooLarge);
    return;
  }
  bytes.resize(kWireHeaderBytes + payload + kWireMacBytes);
  if (!ReadExact(fd.get(), bytes.data() + kWireHeaderBytes, payload + kWireMacBytes, deadline).ok()) {
    Drop(DropReason::kMalformed);
    return;
  }
  Message m;
  if (!Admit(bytes, PeerName(fd.get()), &m)) return;
  nlohmann::json j = nlohmann::json::parse(m.payload, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    Drop(DropReason::kBadPayload);
    return;
  }
  nlohmann::json reply;
  MessageType reply_type;
  if (m.type == MessageType::kPropose) {
    reply_type = MessageType::kProposeReply;
    auto change = ChangeFromJson(j.value("change", nlohmann::json()));
    Result<uint64_t> version = change.ok() ? ProposeLocal(*change) : Result<uint64_t>(change.status());
    reply = version.ok() ? nlohmann::json{{"ok", true}, {"version", *version}}
                         : nlohmann::json{{"ok", false}, {"code", static_cast<int>(version.status().code())},
                                          {"error", version.status().message()}};
  } else if (m.type == MessageType::kProbe) {
    reply_type = MessageType::kProbeReply;
    const uint64_t n = j.value("bytes", uint64_t{0});
    if (n > kMaxProbeBytes) {
      Drop(DropReason::kTooLarge);
      return;
    }
    // Probes move megabytes: give them longer than a request, but still a bound.
    const comm::Deadline probe_deadline = AfterMs(10 * static_cast<uint64_t>(options_.tcp_timeout_ms));
    std::vector<uint8_t> sink(std::min<uint64_t>(n, 1 << 20));
    for (uint64_t done = 0; done < n;) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, sink.size()));
      if (!ReadExact(fd.get(), sink.data(), chunk, probe_deadline).ok()) return;
      done += chunk;
    }
    reply = {{"bytes", n}};
  } else {
    Drop(DropReason::kBadPayload);  // a UDP-only message on TCP
    return;
  }
  accepted_.fetch_add(1);
  std::vector<uint8_t> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out = EncodeLocked(reply_type, reply);
  }
  (void)WriteAll(fd.get(), out, deadline + std::chrono::milliseconds(options_.tcp_timeout_ms));
}

Result<Message> ClusterNode::Request(const SocketAddress& to, MessageType type,
                                     const nlohmann::json& payload, size_t raw_bytes_after,
                                     MessageType reply_type, int timeout_ms) {
  const comm::Deadline deadline = AfterMs(static_cast<uint64_t>(timeout_ms));
  COHORT_ASSIGN_OR_RETURN(Fd fd, comm::ConnectTcp(to, deadline));
  std::vector<uint8_t> request;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request = EncodeLocked(type, payload);
  }
  COHORT_RETURN_IF_ERROR(WriteAll(fd.get(), request, deadline));
  if (raw_bytes_after > 0) {
    std::vector<uint8_t> chunk(std::min<size_t>(raw_bytes_after, 1 << 20), 0x5a);
    for (size_t done = 0; done < raw_bytes_after;) {
      const size_t n = std::min(chunk.size(), raw_bytes_after - done);
      COHORT_RETURN_IF_ERROR(WriteAll(fd.get(), std::span<const uint8_t>(chunk.data(), n), deadline));
      done += n;
    }
  }
  std::vector<uint8_t> reply(kWireHeaderBytes);
  COHORT_RETURN_IF_ERROR(ReadExact(fd.get(), reply.data(), reply.size(), deadline));
  const size_t n = PeekPayloadBytes(reply);
  if (n > kMaxPayloadBytes) return Corrupt("reply too large");
  reply.resize(kWireHeaderBytes + n + kWireMacBytes);
  COHORT_RETURN_IF_ERROR(ReadExact(fd.get(), reply.data() + kWireHeaderBytes, n + kWireMacBytes, deadline));
  Message m;
  if (!Admit(reply, to.ToString(), &m)) return Corrupt("reply from " + to.ToString() + " failed authentication");
  if (m.type != reply_type) return Corrupt("unexpected reply type");
  return m;
}

Result<uint64_t> ClusterNode::ProposeLocal(const Change& change) {
  std::vector<Outgoing> out;
  uint64_t version = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!UpdateLeadershipLocked()) return Unavailable("this node is not the leader");
    // Applied to a copy first: a change that would not fit one message is refused whole.
    ClusterState next = state_;
    COHORT_RETURN_IF_ERROR(next.Apply(change));
    if (StateToJson(next).dump().size() > kMaxPayloadBytes - 1024) {
      return ResourceExhausted("the change would make the cluster state too large");
    }
    state_ = std::move(next);
    version = state_.version;
    BroadcastStateLocked(&out);
  }
  Send(out);
  Notify({}, true);
  return version;
}

Result<uint64_t> ClusterNode::ProposeChange(const Change& change, int timeout_ms) {
  COHORT_RETURN_IF_ERROR(change.Validate());
  // The caller's bound on its wait, in real time like the waits inside.
  const comm::Deadline deadline = AfterMs(static_cast<uint64_t>(timeout_ms));
  Status last = Unavailable("no leader reachable");
  while (!stop_.load() && comm::Clock::now() < deadline) {
    NodeId leader;
    std::string leader_address;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      leader = table_->Leader();
      if (const Member* m = table_->Find(leader)) leader_address = m->address;
    }
    if (leader == id_) {
      auto version = ProposeLocal(change);
      if (version.ok() || version.status().code() != StatusCode::kUnavailable) return version;
      last = version.status();
    } else {
      auto to = SocketAddress::ParseNumeric(leader_address);
      const int left = comm::PollTimeoutMs(deadline);
      auto reply = to.ok() ? Request(*to, MessageType::kPropose, {{"change", ChangeToJson(change)}}, 0,
                                     MessageType::kProposeReply, std::max(left, 1))
                           : Result<Message>(to.status());
      if (reply.ok()) {
        nlohmann::json j = nlohmann::json::parse(reply->payload, nullptr, false);
        if (j.is_object() && j.value("ok", false)) return j.value("version", uint64_t{0});
        const int code = j.is_object() ? j.value("code", 0) : 0;
        last = Status(static_cast<StatusCode>(std::clamp(code, 1, 11)),
                      j.is_object() ? j.value("error", std::string("bad reply")) : "bad reply");
        if (last.code() != StatusCode::kUnavailable) return last;
      } else {
        last = reply.status();
      }
    }
    // Leadership is moving (or the leader is unreachable): wait for the views to settle.
    std::unique_lock<std::mutex> lock(stop_mutex_);
    stop_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_.load(); });
  }
  return last.Annotate("propose");
}

void ClusterNode::ProbeBandwidth(const NodeId& peer, const SocketAddress& to) {
  // A measurement of the real link, so timed by the real clock.
  const auto start = std::chrono::steady_clock::now();
  auto reply = Request(to, MessageType::kProbe, {{"bytes", options_.probe_bytes}}, options_.probe_bytes,
                       MessageType::kProbeReply, 10 * options_.tcp_timeout_ms);
  if (!reply.ok()) {
    log_->Debug("cluster: probe to {} failed: {}", to.ToString(), reply.status().ToString());
    return;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  if (table_->Find(peer) == nullptr) return;
  LinkMeasurement& link = links_[peer];
  link.peer = peer;
  link.bandwidth_Bps = static_cast<double>(options_.probe_bytes) / std::max(s, 1e-6);
}

void ClusterNode::ProfileLoop() {
  if (options_.profile.run_benchmarks) {
    auto measured = MeasureResources(options_.profile);
    if (measured.ok()) {
      std::lock_guard<std::mutex> lock(mutex_);
      profile_ = *measured;
    } else {
      log_->Warn("cluster: profiling failed: {}", measured.status().ToString());
    }
  }
  uint64_t next_probe_ms = clock_->MonotonicMs() + 2 * static_cast<uint64_t>(options_.heartbeat_ms);
  while (!stop_.load()) {
    if (options_.probe_interval_ms > 0 && clock_->MonotonicMs() >= next_probe_ms) {
      next_probe_ms = clock_->MonotonicMs() + static_cast<uint64_t>(options_.probe_interval_ms);
      std::vector<Member> members;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        members = table_->List();
      }
      for (const Member& m : members) {
        auto to = SocketAddress::ParseNumeric(m.address);
        if (stop_.load() || !to.ok() || m.liveness != Liveness::kAlive) continue;
        ProbeBandwidth(m.id, *to);
      }
    }
    std::unique_lock<std::mutex> lock(stop_mutex_);
    stop_cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_.load(); });
  }
}

}  // namespace cohort::cluster
