// ClusterNode lifecycle and the UDP side: receiving and admitting datagrams, heartbeats,
// liveness ticks, leadership and state replication. TCP requests are in cluster_node_tcp.cc.
#include "cluster/cluster_node.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>

namespace cohort::cluster {

using comm::Fd;
using comm::SocketAddress;

namespace {

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "node";
  return buf;
}

}  // namespace

Result<std::unique_ptr<ClusterNode>> ClusterNode::Start(const ClusterOptions& options, Logger* log,
                                                        ClusterCallbacks callbacks) {
  COHORT_CHECK(log != nullptr);
  COHORT_CHECK(options.clock != nullptr);
  COHORT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<ClusterNode> node(new ClusterNode());
  node->options_ = options;
  node->clock_ = options.clock;
  if (node->options_.name.empty()) node->options_.name = HostName();
  node->log_ = log;
  node->callbacks_ = std::move(callbacks);
  COHORT_ASSIGN_OR_RETURN(node->id_, LoadOrCreateNodeId(options.state_dir));
  COHORT_ASSIGN_OR_RETURN(node->key_, DeriveClusterKey(options.secret));
  COHORT_ASSIGN_OR_RETURN(node->listen_, SocketAddress::Parse(options.listen));
  COHORT_ASSIGN_OR_RETURN(node->udp_, BindUdp(node->listen_));
  if (node->listen_.port() == 0) {
    // An ephemeral port: take the one UDP got, so TCP listens on the same number.
    socklen_t len = sizeof(node->listen_.addr);
    ::getsockname(node->udp_.get(), reinterpret_cast<sockaddr*>(&node->listen_.addr), &len);
  }
  COHORT_ASSIGN_OR_RETURN(node->tcp_, ListenTcp(node->listen_, options.max_pending_connections));
  node->advertise_ = node->listen_;
  if (!options.advertise.empty()) {
    COHORT_ASSIGN_OR_RETURN(node->advertise_, SocketAddress::Parse(options.advertise));
  }
  if (options.multicast) {
    COHORT_ASSIGN_OR_RETURN(node->multicast_group_, SocketAddress::Parse(options.multicast_group));
    SocketAddress iface = node->listen_;
    iface.addr.sin_port = 0;
    // A host without a multicast-capable interface (no default route, loopback only) still
    // forms clusters through --peers: warn and go on without beacons.
    auto group = BindMulticast(node->multicast_group_, iface);
    Status sender = group.ok() ? SetMulticastSender(node->udp_.get(), iface) : group.status();
    if (sender.ok()) {
      node->multicast_ = std::move(*group);
    } else {
      log->Warn("cluster: no multicast discovery ({}); only --peers will be used", sender.ToString());
    }
  }
  for (const std::string& peer : options.peers) {
    auto addr = SocketAddress::Parse(peer);
    if (!addr.ok()) return addr.status().Annotate("--peers");
    if (!(*addr == node->advertise_)) node->seeds_.push_back(*addr);
  }
  node->boot_ms_ = node->clock_->WallMs();
  node->table_ = std::make_unique<MemberTable>(node->id_, options.max_members, options.timeouts);
  node->replay_ = std::make_unique<ReplayGuard>(options.replay_window_ms);
  std::vector<std::string> seed_names;
  for (const SocketAddress& s : node->seeds_) seed_names.push_back(s.ToString());
  node->watch_ = std::make_unique<DiscoveryWatch>(std::move(seed_names), Clock::Real().MonotonicMs(),
                                                  static_cast<uint64_t>(options.discovery_warn_ms));
  node->tokens_ = options.max_packets_per_s;
  node->tokens_at_ms_ = Clock::Real().MonotonicMs();
  // Until measured, publish what is cheap to know.
  ProfileOptions quick = options.profile;
  quick.run_benchmarks = false;
  if (auto p = MeasureResources(quick); p.ok()) node->profile_ = *p;

  ClusterNode* n = node.get();
  n->receive_thread_ = std::thread([n] { n->ReceiveLoop(); });
  n->accept_thread_ = std::thread([n] { n->AcceptLoop(); });
  for (int i = 0; i < 2; ++i) n->connection_threads_.emplace_back([n] { n->ConnectionLoop(); });
  n->tick_thread_ = std::thread([n] { n->TickLoop(); });
  n->profile_thread_ = std::thread([n] { n->ProfileLoop(); });
  log->Info("cluster: node {} ({}) on {}", n->id_.Short(), n->options_.name, n->address());
  return node;
}

ClusterNode::~ClusterNode() { Stop(); }

void ClusterNode::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    if (stop_.exchange(true)) return;
  }
  stop_cv_.notify_all();
  {
    // Taking the lock orders this wake-up after any handler's check of stop_, so none of
    // them can miss it and wait forever.
    std::lock_guard<std::mutex> lock(connections_mutex_);
  }
  connections_cv_.notify_all();
  for (std::thread* t : {&receive_thread_, &tick_thread_, &accept_thread_, &profile_thread_}) {
    if (t->joinable()) t->join();
  }
  for (std::thread& t : connection_threads_) t.join();
  connection_threads_.clear();
  connections_.clear();
  udp_.Reset();
  multicast_.Reset();
  tcp_.Reset();
}

bool ClusterNode::WaitForState(const std::function<bool(const ClusterState&)>& ready, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!ready(state_)) {
    // Bounded slices, so a Stop (which does not take mutex_) is noticed.
    if (stop_.load() || std::chrono::steady_clock::now() >= deadline) return false;
    state_cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
  return true;
}

void ClusterNode::ReceiveLoop() {
  std::vector<uint8_t> buffer;
  while (!stop_.load()) {
    pollfd fds[2] = {{udp_.get(), POLLIN, 0}, {multicast_.get(), POLLIN, 0}};
    const int nfds = multicast_.valid() ? 2 : 1;
    if (::poll(fds, static_cast<nfds_t>(nfds), 100) <= 0) continue;
    for (int i = 0; i < nfds; ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      buffer.resize(kMaxMessageBytes);
      SocketAddress from;
      bool truncated = false;
      if (RecvFrom(fds[i].fd, 0, &buffer, &from, &truncated)) HandleDatagram(buffer, from, truncated);
    }
  }
}

// The loop wakes every heartbeat_ms of real time (a condition variable can wait on nothing
// else); what each tick decides (who is silent, when to ping) reads clock_, so a test moving a
// ManualClock controls liveness while real heartbeats still flow between the ticks.
void ClusterNode::TickLoop() {
  while (!stop_.load()) {
    std::vector<Outgoing> out;
    std::vector<MemberChange> changes;
    bool state_changed = false;
    Tick(&out, &changes, &state_changed);
    WarnAboutDiscovery();
    Send(out);
    Notify(changes, state_changed);
    std::unique_lock<std::mutex> lock(stop_mutex_);
    stop_cv_.wait_for(lock, std::chrono::milliseconds(options_.heartbeat_ms),
                      [&] { return stop_.load(); });
  }
}

bool ClusterNode::Admit(std::span<const uint8_t> bytes, const std::string& from, Message* message) {
  switch (DecodeMessage(key_, bytes, message)) {
    case DecodeError::kNone: break;
    case DecodeError::kTooLarge: Drop(DropReason::kTooLarge); return false;
    case DecodeError::kBadMac:
      Drop(DropReason::kBadMac);
      if (auto warning = watch_->BadMac(from, Clock::Real().MonotonicMs())) log_->Warn("{}", *warning);
      return false;
    default: Drop(DropReason::kMalformed); return false;
  }
  if (message->sender == id_) return false;  // our own multicast, looped back
  std::lock_guard<std::mutex> lock(mutex_);
  switch (replay_->Check(*message, clock_->WallMs())) {
    case ReplayGuard::Verdict::kAccept: return true;
    case ReplayGuard::Verdict::kStale: Drop(DropReason::kStale); return false;
    case ReplayGuard::Verdict::kReplay: Drop(DropReason::kReplay); return false;
    case ReplayGuard::Verdict::kFull: Drop(DropReason::kReplayFull); return false;
  }
  return false;
}

void ClusterNode::HandleDatagram(std::span<const uint8_t> bytes, const SocketAddress& from,
                                 bool truncated) {
  {
    // A token bucket bounds the work garbage can cause: MAC checks and JSON parsing. That work
    // costs real CPU time, so the bucket refills by the real clock, not the injected one.
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t now = Clock::Real().MonotonicMs();
    const double rate = options_.max_packets_per_s;
    tokens_ = std::min(rate, tokens_ + rate * static_cast<double>(now - tokens_at_ms_) / 1000.0);
    tokens_at_ms_ = now;
    if (tokens_ < 1) {
      Drop(DropReason::kRateLimited);
      return;
    }
    tokens_ -= 1;
  }
  if (truncated) {
    Drop(DropReason::kTooLarge);
    return;
  }
  Message m;
  if (!Admit(bytes, from.ToString(), &m)) return;
  watch_->Heard(from.ToString());
  nlohmann::json j = nlohmann::json::parse(m.payload, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    Drop(DropReason::kBadPayload);
    return;
  }
  std::vector<Outgoing> out;
  std::vector<MemberChange> changes;
  bool state_changed = false;
  try {
    switch (m.type) {
      case MessageType::kHeartbeat: HandleHeartbeat(m, j, from, &out, &changes); break;
      case MessageType::kState: HandleState(j, &out, &state_changed); break;
      case MessageType::kStateRequest: {
        std::lock_guard<std::mutex> lock(mutex_);
        out.push_back({from, EncodeLocked(MessageType::kState, StateToJson(state_))});
        break;
      }
      case MessageType::kPing: {
        std::lock_guard<std::mutex> lock(mutex_);
        out.push_back({from, EncodeLocked(MessageType::kPong, {{"t", j.at("t").get<uint64_t>()}})});
        break;
      }
      case MessageType::kPong: {
        // A measurement of the real link, so the real clock (as when the ping was stamped).
        const uint64_t sent_ns = j.at("t").get<uint64_t>();
        const uint64_t now_ns = Clock::Real().MonotonicNs();
        if (sent_ns > now_ns || now_ns - sent_ns > 10'000'000'000ull) throw std::out_of_range("t");
        const double one_way_s = static_cast<double>(now_ns - sent_ns) / 2e9;
        std::lock_guard<std::mutex> lock(mutex_);
        if (table_->Find(m.sender) == nullptr) break;
        LinkMeasurement& link = links_[m.sender];
        link.peer = m.sender;
        // The minimum of recent samples: delays add to a round trip (a busy receiver thread,
        // the start-up benchmarks), never subtract, so the smallest is the link's own latency.
        std::deque<double>& samples = latency_samples_[m.sender];
        samples.push_back(one_way_s);
        if (samples.size() > kLatencySamples) samples.pop_front();
        link.latency_s = *std::min_element(samples.begin(), samples.end());
        break;
      }
      default:
        Drop(DropReason::kBadPayload);  // a TCP-only message on UDP
        return;
    }
  } catch (const std::exception&) {
    Drop(DropReason::kBadPayload);
    return;
  }
  accepted_.fetch_add(1);
  Send(out);
  Notify(changes, state_changed);
}

void ClusterNode::HandleHeartbeat(const Message& m, const nlohmann::json& j,
                                  const SocketAddress& from, std::vector<Outgoing>* out,
                                  std::vector<MemberChange>* changes) {
  Member heard;
  heard.id = m.sender;
  heard.name = j.at("name").get<std::string>().substr(0, 64);
  heard.boot_ms = j.at("boot").get<uint64_t>();
  heard.term = j.at("term").get<uint64_t>();
  heard.version = j.at("version").get<uint64_t>();
  // The advertised address when given (NAT, 0.0.0.0 listeners); else where the packet came from.
  heard.address = from.ToString();
  if (j.contains("addr") && j["addr"].is_string()) {
    auto adv = SocketAddress::ParseNumeric(j["addr"].get<std::string>());
    if (adv.ok() && !adv->IsAny() && adv->port() != 0) heard.address = adv->ToString();
  }
  if (j.contains("profile")) heard.profile = ResourceFromJson(j["profile"]);
  if (j.contains("links") && j["links"].is_array()) {
    for (const auto& l : j["links"]) {
      if (heard.links.size() >= options_.max_members) break;
      LinkMeasurement lm;
      auto peer = NodeId::FromHex(l.at(0).get<std::string>());
      if (!peer.ok()) continue;
      lm.peer = *peer;
      lm.latency_s = std::max(0.0, l.at(1).get<double>());
      lm.bandwidth_Bps = std::max(0.0, l.at(2).get<double>());
      heard.links.push_back(lm);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const bool known = table_->Find(heard.id) != nullptr;
  if (!table_->Heard(heard, clock_->MonotonicMs(), changes)) {
    Drop(DropReason::kTableFull);
    return;
  }
  auto to = SocketAddress::ParseNumeric(heard.address);
  if (!to.ok()) return;
  // Answer a newcomer at once rather than at the next tick, so joins converge quickly.
  if (!known) out->push_back({*to, EncodeLocked(MessageType::kHeartbeat, HeartbeatPayloadLocked())});
  ClusterState advertised;
  advertised.term = heard.term;
  advertised.version = heard.version;
  NodeId writer;
  if (j.contains("writer") && j["writer"].is_string()) {
    if (auto w = NodeId::FromHex(j["writer"].get<std::string>()); w.ok()) writer = *w;
  }
  // The same stamp from another writer is a different state (two nodes that each led alone):
  // fetch it too, to learn the members it names and let a leader resolve the conflict.
  const bool same_stamp_other_writer = !advertised.NewerThan(state_) && !state_.NewerThan(advertised) &&
                                       !writer.IsZero() && writer != state_.leader;
  if (advertised.NewerThan(state_) || same_stamp_other_writer) {
    out->push_back({*to, EncodeLocked(MessageType::kStateRequest, nlohmann::json::object())});
  } else if (state_.NewerThan(advertised) && table_->Leader() == id_) {
    out->push_back({*to, EncodeLocked(MessageType::kState, StateToJson(state_))});
  }
}

void ClusterNode::HandleState(const nlohmann::json& j, std::vector<Outgoing>* out, bool* adopted) {
  auto incoming = StateFromJson(j);
  if (!incoming.ok()) throw std::invalid_argument(incoming.status().message());
  std::lock_guard<std::mutex> lock(mutex_);
  // Greet the members a state names that this node has not heard from, adopted or not: that
  // is how a node that knew a single peer comes to hear, and be heard by, all of them.
  for (const StateMember& m : incoming->members) {
    auto to = SocketAddress::ParseNumeric(m.address);
    if (m.id == id_ || table_->Find(m.id) != nullptr || !to.ok() || to->IsAny()) continue;
    out->push_back({*to, EncodeLocked(MessageType::kHeartbeat, HeartbeatPayloadLocked())});
  }
  max_term_seen_ = std::max(max_term_seen_, incoming->term);
  // Equal (term, version) from another leader is a conflict too: neither would replace the
  // other on the followers, so the current leader must move past both.
  const bool rival = incoming->leader != id_ && incoming->term >= state_.term;
  if (incoming->NewerThan(state_)) {
    state_ = std::move(*incoming);
    *adopted = true;
  }
  // Two leaders met (a healed partition, or two nodes that started alone): the one that
  // leads now takes a term above every term seen, so its state wins everywhere.
  if (table_->Leader() == id_ && (state_.leader != id_ || rival)) {
    was_leader_ = false;
    if (UpdateLeadershipLocked()) *adopted = true;
    BroadcastStateLocked(out);
  }
}

void ClusterNode::Tick(std::vector<Outgoing>* out, std::vector<MemberChange>* changes,
                       bool* state_changed) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t now = clock_->MonotonicMs();
  table_->Tick(now, changes);
  const uint64_t version_before = state_.version;
  const bool leading = UpdateLeadershipLocked();
  *state_changed = state_.version != version_before;

  // Heartbeats go to the multicast group, the --peers seeds and every member in the table
  // (dead ones too, so a healed link is noticed), each address once.
  const std::vector<uint8_t> beat = EncodeLocked(MessageType::kHeartbeat, HeartbeatPayloadLocked());
  if (multicast_.valid()) out->push_back({multicast_group_, beat});
  std::set<std::string> sent_to;
  for (const SocketAddress& seed : seeds_) {
    if (sent_to.insert(seed.ToString()).second) out->push_back({seed, beat});
  }
  const std::vector<Member> members = table_->List();
  for (const Member& m : members) {
    auto to = SocketAddress::ParseNumeric(m.address);
    if (to.ok() && sent_to.insert(to->ToString()).second) out->push_back({*to, beat});
  }
  // The agreed state names members this node may not have heard yet (it knew one peer):
  // greeting them lets them hear it directly, which is the only way anyone joins a table.
  sent_to.insert(advertise_.ToString());
  for (const StateMember& m : state_.members) {
    auto to = SocketAddress::ParseNumeric(m.address);
    if (m.id != id_ && to.ok() && !to->IsAny() && sent_to.insert(to->ToString()).second) {
      out->push_back({*to, beat});
    }
  }
  // The leader re-sends its state now and then, so a lost datagram is repaired.
  if (leading && (*state_changed || tick_count_ % 4 == 0)) BroadcastStateLocked(out);
  if (now >= last_ping_ms_ + static_cast<uint64_t>(options_.ping_interval_ms)) {
    last_ping_ms_ = now;
    for (const Member& m : members) {
      auto to = SocketAddress::ParseNumeric(m.address);
      if (!to.ok() || m.liveness == Liveness::kDead) continue;
      out->push_back({*to, EncodeLocked(MessageType::kPing, {{"t", Clock::Real().MonotonicNs()}})});
    }
  }
  for (const MemberChange& c : *changes) {
    if (c.event == MemberEvent::kForgotten) {
      links_.erase(c.id);
      latency_samples_.erase(c.id);
    }
  }
  ++tick_count_;
}

void ClusterNode::WarnAboutDiscovery() {
  size_t alive_peers = 0;
  std::vector<std::string> addresses;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Member& m : table_->List()) {
      addresses.push_back(m.address);
      alive_peers += m.liveness == Liveness::kAlive ? 1 : 0;
    }
  }
  for (const std::string& w : watch_->Tick(Clock::Real().MonotonicMs(), alive_peers, addresses)) log_->Warn("{}", w);
}

bool ClusterNode::UpdateLeadershipLocked() {
  const bool leading = table_->Leader() == id_;
  if (leading && !was_leader_) {
    // A new leader continues the sequence (version keeps counting) under a new term that is
    // above every term it has seen, so its states replace those of any earlier leader.
    max_term_seen_ = std::max(max_term_seen_, state_.term) + 1;
    state_.term = max_term_seen_;
    state_.leader = id_;
    ++state_.version;
    state_.log.push_back({state_.version, "leader " + id_.Short() + " term " + std::to_string(state_.term)});
    if (state_.log.size() > kMaxLogEntries) state_.log.erase(state_.log.begin());
    log_->Info("cluster: {} leads, term {}", id_.Short(), state_.term);
  }
  was_leader_ = leading;
  if (!leading) return false;
  std::vector<StateMember> members = {{id_, options_.name, advertise_.ToString()}};
  for (const Member& m : table_->List()) {
    if (m.liveness != Liveness::kDead) members.push_back({m.id, m.name, m.address});
  }
  state_.SetMembers(std::move(members));
  return true;
}

void ClusterNode::BroadcastStateLocked(std::vector<Outgoing>* out) {
  const std::vector<uint8_t> bytes = EncodeLocked(MessageType::kState, StateToJson(state_));
  for (const Member& m : table_->List()) {
    auto to = SocketAddress::ParseNumeric(m.address);
    if (to.ok() && m.liveness != Liveness::kDead) out->push_back({*to, bytes});
  }
}

std::vector<uint8_t> ClusterNode::EncodeLocked(MessageType type, const nlohmann::json& payload) {
  Message m;
  m.type = type;
  m.sender = id_;
  m.payload = payload.dump();
  return EncodeMessage(key_, std::move(m), *clock_);
}

nlohmann::json ClusterNode::HeartbeatPayloadLocked() const {
  nlohmann::json links = nlohmann::json::array();
  for (const auto& [peer, l] : links_) links.push_back({peer.Hex(), l.latency_s, l.bandwidth_Bps});
  return {{"name", options_.name}, {"addr", advertise_.ToString()}, {"boot", boot_ms_},
          {"term", state_.term}, {"version", state_.version}, {"writer", state_.leader.Hex()},
          {"leader", table_->Leader().Hex()},
          {"profile", ResourceToJson(profile_)}, {"links", links}};
}

void ClusterNode::Send(const std::vector<Outgoing>& out) {
  for (const Outgoing& o : out) {
    // Best effort, as UDP is: a failed send (no route yet, buffer full) is repaired by the
    // next heartbeat.
    if (SendTo(udp_.get(), o.to, o.bytes).ok()) sent_.fetch_add(1);
  }
}

void ClusterNode::Notify(const std::vector<MemberChange>& changes, bool state_changed) {
  for (const MemberChange& c : changes) {
    log_->Info("cluster: {} ({}, {}) {}", c.id.Short(), c.name, c.address, MemberEventName(c.event));
    if (callbacks_.on_member) callbacks_.on_member(c);
  }
  if (state_changed) {
    std::lock_guard<std::mutex> lock(mutex_);
    state_cv_.notify_all();
  }
  if (state_changed && callbacks_.on_state) {
    ClusterState copy;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      copy = state_;
    }
    callbacks_.on_state(copy);
  }
}

}  // namespace cohort::cluster
