// MemberTable: heartbeat bookkeeping, silence timeouts and the leader rule.
#include "cluster/member_table.h"

namespace cohort::cluster {

const char* LivenessName(Liveness l) {
  switch (l) {
    case Liveness::kAlive: return "alive";
    case Liveness::kSuspect: return "suspect";
    case Liveness::kDead: return "dead";
  }
  return "unknown";
}

const char* MemberEventName(MemberEvent e) {
  switch (e) {
    case MemberEvent::kJoined: return "joined";
    case MemberEvent::kRejoined: return "rejoined";
    case MemberEvent::kRecovered: return "alive again";
    case MemberEvent::kSuspect: return "suspect";
    case MemberEvent::kDead: return "dead";
    case MemberEvent::kForgotten: return "forgotten";
  }
  return "unknown";
}

bool MemberTable::Heard(const Member& heard, uint64_t now_ms, std::vector<MemberChange>* changes) {
  if (heard.id == self_ || heard.id.IsZero()) return true;
  auto it = members_.find(heard.id);
  if (it == members_.end()) {
    if (members_.size() >= max_members_) {
      // Make room only by dropping the longest-dead member; live members are never evicted.
      auto victim = members_.end();
      for (auto m = members_.begin(); m != members_.end(); ++m) {
        if (m->second.liveness == Liveness::kDead &&
            (victim == members_.end() || m->second.last_heard_ms < victim->second.last_heard_ms)) {
          victim = m;
        }
      }
      if (victim == members_.end()) return false;
      changes->push_back({victim->first, victim->second.name, victim->second.address,
                          MemberEvent::kForgotten});
      members_.erase(victim);
    }
    Member m = heard;
    m.liveness = Liveness::kAlive;
    m.last_heard_ms = now_ms;
    members_.emplace(m.id, m);
    changes->push_back({m.id, m.name, m.address, MemberEvent::kJoined});
    return true;
  }
  Member& m = it->second;
  const Liveness before = m.liveness;
  const bool restarted = heard.boot_ms != m.boot_ms;
  m.name = heard.name;
  m.address = heard.address;
  m.boot_ms = heard.boot_ms;
  m.term = heard.term;
  m.version = heard.version;
  m.profile = heard.profile;
  m.links = heard.links;
  m.last_heard_ms = now_ms;
  m.liveness = Liveness::kAlive;
  if (restarted) {
    changes->push_back({m.id, m.name, m.address, MemberEvent::kRejoined});
  } else if (before != Liveness::kAlive) {
    changes->push_back({m.id, m.name, m.address, MemberEvent::kRecovered});
  }
  return true;
}

void MemberTable::Tick(uint64_t now_ms, std::vector<MemberChange>* changes) {
  for (auto it = members_.begin(); it != members_.end();) {
    Member& m = it->second;
    const uint64_t silent = now_ms > m.last_heard_ms ? now_ms - m.last_heard_ms : 0;
    if (m.liveness == Liveness::kDead && silent >= timeouts_.dead_ms + timeouts_.forget_ms) {
      changes->push_back({m.id, m.name, m.address, MemberEvent::kForgotten});
      it = members_.erase(it);
      continue;
    }
    if (m.liveness != Liveness::kDead && silent >= timeouts_.dead_ms) {
      m.liveness = Liveness::kDead;
      changes->push_back({m.id, m.name, m.address, MemberEvent::kDead});
    } else if (m.liveness == Liveness::kAlive && silent >= timeouts_.suspect_ms) {
      m.liveness = Liveness::kSuspect;
      changes->push_back({m.id, m.name, m.address, MemberEvent::kSuspect});
    }
    ++it;
  }
}

NodeId MemberTable::Leader() const {
  NodeId leader = self_;
  for (const auto& [id, m] : members_) {
    // Suspects still count: a node that misses one heartbeat should not move the leadership.
    if (m.liveness != Liveness::kDead && id < leader) leader = id;
  }
  return leader;
}

const Member* MemberTable::Find(const NodeId& id) const {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<Member> MemberTable::List() const {
  std::vector<Member> out;
  out.reserve(members_.size());
  for (const auto& [id, m] : members_) out.push_back(m);
  return out;
}

}  // namespace cohort::cluster
