// The local view of who is in the cluster: members heard from (by heartbeat), their liveness
// (alive, suspect, dead by silence timeouts), their published profiles, and the leader rule.
// Pure logic over a millisecond clock passed in, so it is testable without sockets.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cluster/node_id.h"
#include "cluster/profile.h"

namespace cohort::cluster {

enum class Liveness { kAlive, kSuspect, kDead };
const char* LivenessName(Liveness l);

struct Member {
  NodeId id;
  std::string name;
  std::string address;      // host:port its heartbeats come from (its control socket)
  uint64_t boot_ms = 0;     // the member's start time: a new value means it restarted
  Liveness liveness = Liveness::kAlive;
  uint64_t last_heard_ms = 0;  // the node's Clock, monotonic ms
  uint64_t term = 0;           // the state it advertises
  uint64_t version = 0;
  ResourceProfile profile;
  std::vector<LinkMeasurement> links;  // what it measured to its peers
};

struct MemberTimeouts {
  uint64_t suspect_ms = 1500;  // silent this long: suspect
  uint64_t dead_ms = 4000;     // silent this long: dead
  uint64_t forget_ms = 60000;  // dead this long: dropped from the table
};

enum class MemberEvent { kJoined, kRejoined, kRecovered, kSuspect, kDead, kForgotten };
const char* MemberEventName(MemberEvent e);
struct MemberChange {
  NodeId id;
  std::string name;
  std::string address;
  MemberEvent event;
};

class MemberTable {
 public:
  MemberTable(NodeId self, size_t max_members, MemberTimeouts timeouts)
      : self_(self), max_members_(max_members), timeouts_(timeouts) {}

  // Records a heartbeat's contents (id, name, address, boot, advertised state, profile).
  // Returns false (and records nothing) when the table is full of live members.
  bool Heard(const Member& heard, uint64_t now_ms, std::vector<MemberChange>* changes);
  // Applies the silence timeouts.
  void Tick(uint64_t now_ms, std::vector<MemberChange>* changes);

  // The leader: the lowest id among this node and the members not dead. Every node that sees
  // the same live set picks the same one.
  NodeId Leader() const;
  const Member* Find(const NodeId& id) const;
  std::vector<Member> List() const;  // sorted by id, self not included
  size_t size() const { return members_.size(); }

 private:
  NodeId self_;
  size_t max_members_;
  MemberTimeouts timeouts_;
  std::map<NodeId, Member> members_;
};

}  // namespace cohort::cluster
