// InstanceStore's file format (a JSON array, version-tagged) and its atomic write; see
// instance_store.h.
#include "cluster/instance_store.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace cohort::cluster {
namespace {

using nlohmann::json;
constexpr int kFormatVersion = 1;
constexpr size_t kMaxStored = 1024;

}  // namespace

std::vector<StoredInstance> StoredInstancesOf(const Records& records, const std::map<std::string, std::string>& held) {
  std::vector<StoredInstance> out;
  for (const auto& [id, instance] : records.instances) {
    StoredInstance s{id, instance.model, instance.layout, instance.nodes, ""};
    if (auto m = records.models.find(instance.model); m != records.models.end()) {
      if (auto h = held.find(m->second.sha256); h != held.end()) s.model_path = h->second;
    }
    out.push_back(std::move(s));
  }
  return out;
}

Status SaveInstances(const std::string& path, const std::vector<StoredInstance>& instances) {
  json list = json::array();
  for (const StoredInstance& s : instances) {
    list.push_back({{"id", s.id}, {"model", s.model}, {"layout", s.layout}, {"nodes", s.nodes}, {"model_path", s.model_path}});
  }
  const json doc = {{"version", kFormatVersion}, {"instances", list}};
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << doc.dump(2) << "\n";
    if (!out.flush()) return IoError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return IoError("cannot rename " + tmp + ": " + ec.message());
  return Status::Ok();
}

Result<std::vector<StoredInstance>> LoadInstances(const std::string& path) {
  std::vector<StoredInstance> out;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const json doc = json::parse(text.str(), nullptr, false);
  if (!doc.is_object() || doc.value("version", 0) != kFormatVersion || !doc.value("instances", json()).is_array()) {
    return Corrupt(path + ": not an instance list of version " + std::to_string(kFormatVersion));
  }
  for (const json& j : doc["instances"]) {
    if (out.size() >= kMaxStored) break;
    if (!j.is_object() || !j.value("id", json()).is_string() || !j.value("model", json()).is_string()) {
      return Corrupt(path + ": an instance without id or model");
    }
    StoredInstance s;
    s.id = j["id"].get<std::string>();
    s.model = j["model"].get<std::string>();
    s.layout = j.value("layout", std::string("tp"));
    s.nodes = j.value("nodes", 0);
    s.model_path = j.value("model_path", std::string());
    out.push_back(std::move(s));
  }
  return out;
}

Instance PendingInstanceOf(const StoredInstance& stored) {
  Instance i;
  i.id = stored.id;
  i.model = stored.model;
  i.layout = stored.layout;
  i.nodes = stored.nodes;
  i.reason = "restored after a restart";
  return i;
}

}  // namespace cohort::cluster
