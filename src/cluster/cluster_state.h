// The agreed cluster state: the members the leader sees, the models and placements, stamped
// with (term, version). The leader applies changes one at a time, each one numbered; the
// other nodes adopt whole states and keep the one with the highest (term, version).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/node_id.h"
#include "core/status.h"

namespace cohort::cluster {

// Bounds on the state, so it always fits one control message.
inline constexpr size_t kMaxStateMembers = 64;
inline constexpr size_t kMaxStateEntries = 128;     // models and placements, each
inline constexpr size_t kMaxEntryValueBytes = 8192; // one model's or placement's JSON
inline constexpr size_t kMaxLogEntries = 32;        // recent changes kept for display

struct StateMember {
  NodeId id;
  std::string name;
  std::string address;  // host:port of its control socket
  bool operator==(const StateMember&) const = default;
};

enum class ChangeKind {
  kPutModel,         // models[key] = value (e.g. {"path": ..., "sha256": ...})
  kDeleteModel,      // erase models[key]
  kPutPlacement,     // placements[key] = value (e.g. a ShardPlan and its ranks)
  kDeletePlacement,  // erase placements[key]
};
const char* ChangeKindName(ChangeKind kind);
Result<ChangeKind> ParseChangeKind(const std::string& name);

// One proposed change. Membership changes are not proposed: the leader writes them itself.
struct Change {
  ChangeKind kind = ChangeKind::kPutModel;
  std::string key;       // model name or instance id: 1..128 printable characters
  nlohmann::json value;  // object for the Put kinds; ignored by the Delete kinds
  Status Validate() const;
};
nlohmann::json ChangeToJson(const Change& change);
Result<Change> ChangeFromJson(const nlohmann::json& j);

struct LogEntry {
  uint64_t version = 0;
  std::string summary;  // "put_model stories", "members 3"
};

struct ClusterState {
  uint64_t term = 0;     // bumped by each new leader
  uint64_t version = 0;  // bumped by each change; never reset by a new term
  NodeId leader;         // the node that wrote this state
  std::vector<StateMember> members;  // sorted by id
  std::map<std::string, nlohmann::json> models;
  std::map<std::string, nlohmann::json> placements;
  std::vector<LogEntry> log;  // the last kMaxLogEntries changes, oldest first

  // True when this state should replace `other` on a node holding `other`.
  bool NewerThan(const ClusterState& other) const {
    return term != other.term ? term > other.term : version > other.version;
  }
  // Applies one change as the next numbered entry (version + 1); refuses what breaks a bound.
  Status Apply(const Change& change);
  // Replaces the member list (sorted) as the next entry when it differs; returns whether it did.
  bool SetMembers(std::vector<StateMember> members);
};

nlohmann::json StateToJson(const ClusterState& state);
Result<ClusterState> StateFromJson(const nlohmann::json& j);

}  // namespace cohort::cluster
