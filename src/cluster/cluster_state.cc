// ClusterState: applying numbered changes, and its JSON form (wire and /v1/cluster).
#include "cluster/cluster_state.h"

#include <algorithm>

namespace cohort::cluster {
namespace {

constexpr ChangeKind kAllKinds[] = {ChangeKind::kPutModel, ChangeKind::kDeleteModel,
                                    ChangeKind::kPutPlacement, ChangeKind::kDeletePlacement};

bool ValidKey(const std::string& key) {
  if (key.empty() || key.size() > 128) return false;
  return std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

void AppendLog(ClusterState* state, std::string summary) {
  state->log.push_back({state->version, std::move(summary)});
  if (state->log.size() > kMaxLogEntries) state->log.erase(state->log.begin());
}

}  // namespace

const char* ChangeKindName(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kPutModel: return "put_model";
    case ChangeKind::kDeleteModel: return "delete_model";
    case ChangeKind::kPutPlacement: return "put_placement";
    case ChangeKind::kDeletePlacement: return "delete_placement";
  }
  return "unknown";
}

Result<ChangeKind> ParseChangeKind(const std::string& name) {
  for (ChangeKind k : kAllKinds) {
    if (name == ChangeKindName(k)) return k;
  }
  return InvalidArgument("unknown change kind '" + name + "'");
}

Status Change::Validate() const {
  if (!ValidKey(key)) return InvalidArgument("change key must be 1..128 printable characters");
  const bool put = kind == ChangeKind::kPutModel || kind == ChangeKind::kPutPlacement;
  if (put) {
    if (!value.is_object()) return InvalidArgument("a put change needs a JSON object value");
    if (value.dump().size() > kMaxEntryValueBytes) {
      return OutOfRange("change value is larger than " + std::to_string(kMaxEntryValueBytes) + " bytes");
    }
  }
  return Status::Ok();
}

nlohmann::json ChangeToJson(const Change& change) {
  return {{"op", ChangeKindName(change.kind)}, {"key", change.key}, {"value", change.value}};
}

Result<Change> ChangeFromJson(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("op") || !j["op"].is_string() || !j.contains("key") ||
      !j["key"].is_string()) {
    return InvalidArgument("a change needs string fields op and key");
  }
  Change change;
  COHORT_ASSIGN_OR_RETURN(change.kind, ParseChangeKind(j["op"].get<std::string>()));
  change.key = j["key"].get<std::string>();
  if (j.contains("value")) change.value = j["value"];
  COHORT_RETURN_IF_ERROR(change.Validate());
  return change;
}

Status ClusterState::Apply(const Change& change) {
  COHORT_RETURN_IF_ERROR(change.Validate());
  auto& table = (change.kind == ChangeKind::kPutModel || change.kind == ChangeKind::kDeleteModel)
                    ? models : placements;
  switch (change.kind) {
    case ChangeKind::kPutModel:
    case ChangeKind::kPutPlacement:
      if (!table.count(change.key) && table.size() >= kMaxStateEntries) {
        return ResourceExhausted("the cluster state holds its maximum of " +
                                 std::to_string(kMaxStateEntries) + " entries");
      }
      table[change.key] = change.value;
      break;
    case ChangeKind::kDeleteModel:
    case ChangeKind::kDeletePlacement:
      if (table.erase(change.key) == 0) return NotFound("no entry '" + change.key + "'");
      break;
  }
  ++version;
  AppendLog(this, std::string(ChangeKindName(change.kind)) + " " + change.key);
  return Status::Ok();
}

bool ClusterState::SetMembers(std::vector<StateMember> new_members) {
  std::sort(new_members.begin(), new_members.end(),
            [](const StateMember& a, const StateMember& b) { return a.id < b.id; });
  if (new_members.size() > kMaxStateMembers) new_members.resize(kMaxStateMembers);
  if (new_members == members) return false;
  members = std::move(new_members);
  ++version;
  AppendLog(this, "members " + std::to_string(members.size()));
  return true;
}

nlohmann::json StateToJson(const ClusterState& state) {
  nlohmann::json members = nlohmann::json::array();
  for (const StateMember& m : state.members) {
    members.push_back({{"id", m.id.Hex()}, {"name", m.name}, {"address", m.address}});
  }
  nlohmann::json log = nlohmann::json::array();
  for (const LogEntry& e : state.log) log.push_back({{"version", e.version}, {"change", e.summary}});
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [k, v] : state.models) models[k] = v;
  nlohmann::json placements = nlohmann::json::object();
  for (const auto& [k, v] : state.placements) placements[k] = v;
  return {{"term", state.term}, {"version", state.version}, {"leader", state.leader.Hex()},
          {"members", members}, {"models", models}, {"placements", placements}, {"log", log}};
}

Result<ClusterState> StateFromJson(const nlohmann::json& j) {
  // The payload was authenticated, but a peer running other code may still send surprises:
  // check every field's type rather than trusting it.
  try {
    ClusterState s;
    s.term = j.at("term").get<uint64_t>();
    s.version = j.at("version").get<uint64_t>();
    COHORT_ASSIGN_OR_RETURN(s.leader, NodeId::FromHex(j.at("leader").get<std::string>()));
    const auto& members = j.at("members");
    if (!members.is_array() || members.size() > kMaxStateMembers) return Corrupt("bad members");
    for (const auto& m : members) {
      StateMember member;
      COHORT_ASSIGN_OR_RETURN(member.id, NodeId::FromHex(m.at("id").get<std::string>()));
      member.name = m.at("name").get<std::string>();
      member.address = m.at("address").get<std::string>();
      s.members.push_back(std::move(member));
    }
    for (const char* field : {"models", "placements"}) {
      const auto& table = j.at(field);
      if (!table.is_object() || table.size() > kMaxStateEntries) return Corrupt(std::string("bad ") + field);
      auto& out = std::string(field) == "models" ? s.models : s.placements;
      for (const auto& [k, v] : table.items()) out[k] = v;
    }
    if (j.contains("log") && j["log"].is_array()) {
      for (const auto& e : j["log"]) {
        if (s.log.size() >= kMaxLogEntries) break;
        s.log.push_back({e.at("version").get<uint64_t>(), e.at("change").get<std::string>()});
      }
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(std::string("cluster state: ") + e.what());
  }
}

}  // namespace cohort::cluster
