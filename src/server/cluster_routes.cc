// ClusterRouter and the cluster's routes; see cluster_routes.h.
#include "server/cluster_routes.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plan/planner.h"

#include "server/api_response.h"
#include "server/dashboard.h"
#include "server/plan_preview.h"

namespace cohort::server {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
constexpr int kProposeTimeoutMs = 5000;
constexpr int kMaxWaitS = 600;

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2), kJson);
}

json InstancesJson(const cluster::ClusterState& state) {
  json list = json::array();
  for (const auto& v : cluster::ListInstances(state)) list.push_back(cluster::InstanceViewToJson(v));
  return list;
}

// An instance id: 1..64 characters of [A-Za-z0-9._-].
bool ValidId(const std::string& id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

void CreateInstance(cluster::ClusterNode& node, cluster::Reconciler& reconciler, const ClusterRoutesOptions& options,
                    const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("model") || !body["model"].is_string()) {
    return SendStatus(res, InvalidArgument("body must be a JSON object with \"model\": a GGUF path or a model name"));
  }
  auto model = reconciler.ResolveRequestedModel(body["model"].get<std::string>());
  if (!model.ok()) return SendStatus(res, model.status());
  cluster::Instance instance;
  const json id = body.value("id", json(model->name));
  const json layout = body.value("layout", json(options.default_layout));
  const json nodes = body.value("nodes", json(options.default_nodes));
  if (!id.is_string() || !ValidId(id.get<std::string>())) {
    return SendStatus(res, InvalidArgument("id: 1..64 characters of A-Z a-z 0-9 . _ -"));
  }
  if (!layout.is_string()) return SendStatus(res, InvalidArgument("layout: a string"));
  if (!nodes.is_number_integer() || nodes.get<int64_t>() < 0 || nodes.get<int64_t>() > 64) {
    return SendStatus(res, InvalidArgument("nodes: 0..64"));
  }
  // Mistakes the planner would only record as an unplaced instance are refused here, where
  // the caller sees them. The defaults (serve's --nodes and --layout) may name nodes that
  // have yet to join: only their spelling is checked.
  int alive = 0;
  for (const cluster::MemberView& m : node.Snapshot().members) alive += m.liveness == cluster::Liveness::kAlive ? 1 : 0;
  if (body.contains("nodes") && nodes.get<int>() > alive) {
    return SendStatus(res, InvalidArgument(fmt::format("nodes: {} asked, but {} node(s) of this cluster are alive",
                                                       nodes.get<int>(), alive)));
  }
  const int layout_nodes = body.contains("layout") ? alive : 64;
  if (Status s = plan::CheckLayout(layout.get<std::string>(), layout_nodes); !s.ok()) {
    return SendStatus(res, InvalidArgument("layout: " + s.message()));
  }
  instance.id = id.get<std::string>();
  instance.model = model->name;
  instance.layout = layout.get<std::string>();
  instance.nodes = nodes.get<int>();
  if (node.Snapshot().state.placements.count(instance.id) == 0) {
    auto version = node.ProposeChange(cluster::PutInstance(instance), kProposeTimeoutMs);
    if (!version.ok()) return SendStatus(res, Unavailable(version.status().ToString()));
  }
  // With "wait_s", answer once the instance is ready, cannot be placed, or failed to load.
  const json wait = body.value("wait_s", json(0));
  const int wait_s = wait.is_number_integer() ? static_cast<int>(std::clamp<int64_t>(wait.get<int64_t>(), 0, kMaxWaitS)) : 0;
  const std::string wanted = instance.id;
  // On a node that does not lead, the leader has agreed the change when ProposeChange returns,
  // but this node's copy of the state may not hold it yet: wait for that first (without it, a
  // placement that worked was answered 503 "not recorded"), then, if asked, for it to settle.
  const auto has = [&](const cluster::ClusterState& st, bool settled) {
    for (const auto& v : cluster::ListInstances(st)) {
      if (v.instance.id == wanted) return !settled || v.settled();
    }
    return false;
  };
  node.WaitForState([&](const cluster::ClusterState& st) { return has(st, false); }, kProposeTimeoutMs);
  node.WaitForState([&](const cluster::ClusterState& st) { return has(st, true); }, wait_s * 1000);
  for (const auto& v : cluster::ListInstances(node.Snapshot().state)) {
    if (v.instance.id == wanted) return SendJson(res, 201, cluster::InstanceViewToJson(v));
  }
  SendStatus(res, Unavailable("instance " + wanted + " was not recorded (leadership moved?); try again"));
}

void DeleteInstance(cluster::ClusterNode& node, const std::string& id, httplib::Response& res) {
  if (node.Snapshot().state.placements.count(id) == 0) return SendStatus(res, NotFound("no instance '" + id + "'"));
  auto version = node.ProposeChange(cluster::DeleteInstance(id), kProposeTimeoutMs);
  if (!version.ok() && version.status().code() != StatusCode::kNotFound) {
    return SendStatus(res, Unavailable(version.status().ToString()));
  }
  (void)node.ProposeChange(cluster::DeleteRunReport(id), kProposeTimeoutMs);
  (void)node.ProposeChange(cluster::DeleteLoadProgress(id), kProposeTimeoutMs);
  SendJson(res, 200, {{"id", id}, {"deleted", true}});
}

void Rebalance(cluster::ClusterNode& node, const std::string& id, httplib::Response& res) {
  const cluster::Records records = cluster::Records::Of(node.Snapshot().state);
  auto it = records.instances.find(id);
  if (it == records.instances.end()) return SendStatus(res, NotFound("no instance '" + id + "'"));
  // Pending again: the leader places it afresh on the nodes alive now.
  cluster::Instance instance = it->second;
  instance.status = cluster::InstanceStatus::kPending;
  instance.reason = "rebalance requested";
  auto version = node.ProposeChange(cluster::PutInstance(instance), kProposeTimeoutMs);
  if (!version.ok()) return SendStatus(res, Unavailable(version.status().ToString()));
  SendJson(res, 202, {{"id", id}, {"rebalancing", true}, {"version", *version}});
}

// The model files the cluster knows: each with its digest, size, the nodes holding a copy and
// the instances running it (`cohort models`).
json ModelFilesJson(const cluster::ClusterState& state) {
  const cluster::Records records = cluster::Records::Of(state);
  json list = json::array();
  for (const auto& [name, entry] : records.models) {
    json holders = json::array();
    for (const auto& [id, service] : records.nodes) {
      if (service.files.count(entry.sha256) > 0) holders.push_back({{"node", id}, {"name", service.name}});
    }
    json used_by = json::array();
    for (const auto& [id, instance] : records.instances) {
      if (instance.model == name) used_by.push_back(id);
    }
    list.push_back({{"name", name}, {"sha256", entry.sha256}, {"file_bytes", entry.file_bytes},
                    {"layers", entry.shape.n_layer}, {"holders", holders}, {"instances", used_by}});
  }
  return list;
}

// `cohort rm`: the model leaves the registry and every node deletes its copies (reconciler.h).
void RemoveModelFile(cluster::ClusterNode& node, const std::string& name, httplib::Response& res) {
  const cluster::Records records = cluster::Records::Of(node.Snapshot().state);
  auto it = records.models.find(name);
  if (it == records.models.end()) return SendStatus(res, NotFound("no model '" + name + "' (GET /v1/model-files)"));
  for (const auto& [id, instance] : records.instances) {
    if (instance.model != name) continue;
    ApiError busy;
    busy.http_status = 409;
    busy.type = "invalid_request_error";
    busy.code = "model_in_use";
    busy.message = "instance " + id + " runs " + name + ": unload it first (DELETE /v1/instances/" + id + ")";
    return SendError(res, busy);
  }
  for (const cluster::Change& change : {cluster::PutRemovedModel(name, it->second.sha256), cluster::DeleteModelEntry(name)}) {
    auto version = node.ProposeChange(change, kProposeTimeoutMs);
    if (!version.ok()) return SendStatus(res, Unavailable(version.status().ToString()));
  }
  SendJson(res, 200, {{"name", name}, {"sha256", it->second.sha256}, {"removed", true}});
}

}  // namespace

Result<RouteTarget> ClusterRouter::Route(const std::string& model) {
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  const auto views = cluster::ListInstances(snap.state);
  const cluster::InstanceView* target = cluster::FindInstance(views, model);
  if (target == nullptr) target = cluster::FindInstance(views, "");  // like a one-model server
  if (target == nullptr) return NotFound("no model instance on this cluster (POST /v1/instances)");
  if (!target->ready()) {
    std::string why = "instance " + target->instance.id + " is " + cluster::InstanceStateName(target->state);
    if (!target->instance.reason.empty()) why += ": " + target->instance.reason;
    if (target->run.has_value() && !target->run->error.empty()) why += ": " + target->run->error;
    return Unavailable(why);
  }
  const std::string coordinator = target->instance.coordinator;
  RouteTarget route;
  route.instance_id = target->instance.id;
  route.epoch = target->instance.epoch;
  // Relays, to another node or (a resumable stream) to this one, go over the relay channel.
  route.api = target->run->relay;
  if (coordinator == snap.self.Hex()) {
    route.local = host_.Find(target->instance.id, target->instance.epoch);
    if (route.local == nullptr) return Unavailable("instance " + target->instance.id + " stopped running here");
    return route;
  }
  if (target->run->relay.empty()) {
    return Unavailable("instance " + target->instance.id + ": its coordinator gives no relay address (another cohort version?)");
  }
  route.upstream = target->run->relay;
  route.upstream_lost = [this, coordinator] { return WhyLost(coordinator); };
  return route;
}

std::vector<ModelEntry> ClusterRouter::Models() {
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  std::vector<ModelEntry> out;
  for (const auto& v : cluster::ListInstances(snap.state)) {
    ModelEntry entry{v.instance.id, v.instance.model, v.ready(), nullptr};
    if (v.ready() && v.instance.coordinator == snap.self.Hex()) entry.local = host_.Find(v.instance.id, v.instance.epoch);
    out.push_back(std::move(entry));
  }
  return out;
}

std::string ClusterRouter::WhyLost(const std::string& node) const {
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  for (const cluster::MemberView& m : snap.members) {
    if (m.id.Hex() != node) continue;
    if (m.liveness == cluster::Liveness::kAlive) return "";
    return "node " + m.name + " is " + cluster::LivenessName(m.liveness) + " (no heartbeat for " +
           std::to_string(m.silent_ms) + " ms)";
  }
  return "node " + node + " left the cluster";
}

void AddClusterRoutes(HttpServer& server, cluster::ClusterNode& node, cluster::Reconciler& reconciler,
                      const ClusterRoutesOptions& options) {
  httplib::Server& http = server.routes();
  cluster::ClusterNode* n = &node;
  http.Get("/v1/cluster", [n](const httplib::Request&, httplib::Response& res) {
    const cluster::ClusterSnapshot snap = n->Snapshot();
    json j = cluster::SnapshotToJson(snap);
    j["instances"] = InstancesJson(snap.state);
    SendJson(res, 200, j);
  });
  http.Get("/v1/instances", [n](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"object", "list"}, {"data", InstancesJson(n->Snapshot().state)}});
  });
  http.Get(R"(/v1/instances/([A-Za-z0-9._-]+))", [n](const httplib::Request& req, httplib::Response& res) {
    for (const auto& v : cluster::ListInstances(n->Snapshot().state)) {
      if (v.instance.id == req.matches[1].str()) return SendJson(res, 200, cluster::InstanceViewToJson(v));
    }
    SendStatus(res, NotFound("no instance '" + req.matches[1].str() + "'"));
  });
  http.Post("/v1/instances", [n, &reconciler, options](const httplib::Request& req, httplib::Response& res) {
    CreateInstance(*n, reconciler, options, req, res);
  });
  http.Delete(R"(/v1/instances/([A-Za-z0-9._-]+))", [n](const httplib::Request& req, httplib::Response& res) {
    DeleteInstance(*n, req.matches[1].str(), res);
  });
  http.Post("/v1/plan", [n, &reconciler, options](const httplib::Request& req, httplib::Response& res) {
    PlanPreview(*n, reconciler, options.default_layout, options.default_nodes, req, res);
  });
  http.Post(R"(/v1/instances/([A-Za-z0-9._-]+)/rebalance)", [n](const httplib::Request& req, httplib::Response& res) {
    Rebalance(*n, req.matches[1].str(), res);
  });
  http.Get("/v1/model-files", [n](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"object", "list"}, {"data", ModelFilesJson(n->Snapshot().state)}});
  });
  http.Delete(R"(/v1/model-files/([A-Za-z0-9._-]+))", [n](const httplib::Request& req, httplib::Response& res) {
    RemoveModelFile(*n, req.matches[1].str(), res);
  });
  // Instances carry no time of their own: `created` is when this node started serving the API.
  const int64_t created = std::time(nullptr);
  auto model_json = [created](const cluster::InstanceView& v) {
    return json{{"id", v.instance.id}, {"object", "model"}, {"created", created}, {"owned_by", "cohort"},
                {"model", v.instance.model}, {"ready", v.ready()}};
  };
  http.Get("/v1/models", [n, model_json](const httplib::Request&, httplib::Response& res) {
    json data = json::array();
    for (const auto& v : cluster::ListInstances(n->Snapshot().state)) data.push_back(model_json(v));
    SendJson(res, 200, {{"object", "list"}, {"data", data}});
  });
  http.Get(R"(/v1/models/(.+))", [n, model_json](const httplib::Request& req, httplib::Response& res) {
    for (const auto& v : cluster::ListInstances(n->Snapshot().state)) {
      if (v.instance.id == req.matches[1].str()) return SendJson(res, 200, model_json(v));
    }
    SendStatus(res, NotFound("model: no instance '" + req.matches[1].str() + "'"));
  });
  http.Get("/health", [n](const httplib::Request&, httplib::Response& res) {
    const cluster::ClusterSnapshot snap = n->Snapshot();
    int ready = 0;
    for (const auto& v : cluster::ListInstances(snap.state)) ready += v.ready() ? 1 : 0;
    SendJson(res, 200, {{"status", "ok"}, {"node", snap.self.Hex()}, {"leader", snap.leader.Hex()},
                        {"members", snap.members.size()}, {"instances_ready", ready}});
  });
  MountDashboard(server);
}

}  // namespace cohort::server
