// ClusterApi: the routes of a cluster node's public HTTP API; see cluster_api.h.
#include "cluster_api.h"

#include <httplib.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

namespace cohort::app {
namespace {

using nlohmann::json;
constexpr const char* kJson = "application/json";
constexpr int kProposeTimeoutMs = 5000;
constexpr int kMaxWaitS = 600;

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(2), kJson);
}

void SendError(httplib::Response& res, int status, const std::string& message) {
  const char* type = status >= 500 ? "server_error" : "invalid_request_error";
  SendJson(res, status, {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}}}});
}

int HttpStatusOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kResourceExhausted: return 409;
    case StatusCode::kUnavailable: return 503;
    default: return 500;
  }
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

}  // namespace

ClusterApi::ClusterApi(cluster::ClusterNode& node, ModelResolver resolve,
                       const ClusterApiOptions& options, Logger& log)
    : node_(node), resolve_(std::move(resolve)), options_(options), log_(log),
      http_(std::make_unique<httplib::Server>()) {
  const int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(10, 0);
  http_->set_write_timeout(10, 0);
  // One check for every route: the cluster's own routes change what the cluster runs.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_keys.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    for (const std::string& key : options_.api_keys) {
      if (auth == "Bearer " + key) return httplib::Server::HandlerResponse::Unhandled;
    }
    SendJson(res, 401, {{"error", {{"message", "a valid API key is required (Authorization: Bearer KEY)"},
                                   {"type", "authentication_error"}, {"param", nullptr}, {"code", "invalid_api_key"}}}});
    return httplib::Server::HandlerResponse::Handled;
  });
  AddRoutes();
}

ClusterApi::~ClusterApi() { Stop(); }

Result<int> ClusterApi::Bind() {
  const int port = options_.port == 0 ? http_->bind_to_any_port(options_.host)
                                      : (http_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0) return IoError("cannot listen on " + options_.host + ":" + std::to_string(options_.port));
  return port;
}

Status ClusterApi::Serve() {
  if (!http_->listen_after_bind()) return IoError("the cluster API stopped with an error");
  return Status::Ok();
}

void ClusterApi::Stop() { http_->stop(); }

void ClusterApi::AddRoutes() {
  http_->Get("/v1/cluster", [this](const httplib::Request&, httplib::Response& res) {
    const cluster::ClusterSnapshot snap = node_.Snapshot();
    json j = cluster::SnapshotToJson(snap);
    j["instances"] = InstancesJson(snap.state);
    SendJson(res, 200, j);
  });
  http_->Get("/v1/instances", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"object", "list"}, {"data", InstancesJson(node_.Snapshot().state)}});
  });
  http_->Get(R"(/v1/instances/([A-Za-z0-9._-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    const auto views = cluster::ListInstances(node_.Snapshot().state);
    for (const auto& v : views) {
      if (v.instance.id == req.matches[1].str()) return SendJson(res, 200, cluster::InstanceViewToJson(v));
    }
    SendError(res, 404, "no instance '" + req.matches[1].str() + "'");
  });
  http_->Post("/v1/instances", [this](const httplib::Request& req, httplib::Response& res) { CreateInstance(req, res); });
  http_->Delete(R"(/v1/instances/([A-Za-z0-9._-]+))", [this](const httplib::Request& req, httplib::Response& res) {
    DeleteInstance(req.matches[1].str(), res);
  });
  http_->Post(R"(/v1/instances/([A-Za-z0-9._-]+)/rebalance)", [this](const httplib::Request& req, httplib::Response& res) {
    Rebalance(req.matches[1].str(), res);
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) { Models(res); });
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const cluster::ClusterSnapshot snap = node_.Snapshot();
    int ready = 0;
    for (const auto& v : cluster::ListInstances(snap.state)) ready += v.ready() ? 1 : 0;
    SendJson(res, 200, {{"status", "ok"}, {"node", snap.self.Hex()}, {"leader", snap.leader.Hex()},
                        {"members", snap.members.size()}, {"instances_ready", ready}});
  });
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    http_->Post(path, [this](const httplib::Request& req, httplib::Response& res) { Forward(req, res); });
  }
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) { Forward(req, res); });
}

void ClusterApi::CreateInstance(const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("model") || !body["model"].is_string()) {
    return SendError(res, 400, "body must be a JSON object with \"model\": a GGUF path or a model name");
  }
  auto model = resolve_(body["model"].get<std::string>());
  if (!model.ok()) return SendError(res, HttpStatusOf(model.status()), model.status().ToString());
  cluster::Instance instance;
  instance.id = body.value("id", model->name);
  if (!ValidId(instance.id)) return SendError(res, 400, "id: 1..64 characters of A-Z a-z 0-9 . _ -");
  instance.model = model->name;
  instance.layout = body.value("layout", options_.default_layout);
  instance.nodes = body.value("nodes", options_.default_nodes);
  if (instance.nodes < 0 || instance.nodes > 64) return SendError(res, 400, "nodes: 0..64");
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  if (snap.state.placements.count(instance.id) == 0) {
    auto version = node_.ProposeChange(
        {cluster::ChangeKind::kPutPlacement, instance.id, cluster::InstanceToJson(instance)}, kProposeTimeoutMs);
    if (!version.ok()) return SendError(res, 503, version.status().ToString());
  }
  // With "wait_s", answer once the instance is ready, cannot be placed, or failed to load.
  const int wait_s = std::clamp(body.value("wait_s", 0), 0, kMaxWaitS);
  const std::string id = instance.id;
  node_.WaitForState(
      [&](const cluster::ClusterState& st) {
        for (const auto& v : cluster::ListInstances(st)) {
          if (v.instance.id == id) return v.state == "ready" || v.state == "unplaced" || v.state == "failed";
        }
        return false;
      },
      wait_s * 1000);
  for (const auto& v : cluster::ListInstances(node_.Snapshot().state)) {
    if (v.instance.id == id) return SendJson(res, 201, cluster::InstanceViewToJson(v));
  }
  SendError(res, 503, "instance " + id + " was not recorded (leadership moved?); try again");
}

void ClusterApi::DeleteInstance(const std::string& id, httplib::Response& res) {
  if (node_.Snapshot().state.placements.count(id) == 0) return SendError(res, 404, "no instance '" + id + "'");
  auto version = node_.ProposeChange({cluster::ChangeKind::kDeletePlacement, id, {}}, kProposeTimeoutMs);
  if (!version.ok() && version.status().code() != StatusCode::kNotFound) {
    return SendError(res, 503, version.status().ToString());
  }
  (void)node_.ProposeChange({cluster::ChangeKind::kDeleteModel, cluster::kRunKeyPrefix + id, {}}, kProposeTimeoutMs);
  SendJson(res, 200, {{"id", id}, {"deleted", true}});
}

void ClusterApi::Rebalance(const std::string& id, httplib::Response& res) {
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  auto it = snap.state.placements.find(id);
  if (it == snap.state.placements.end()) return SendError(res, 404, "no instance '" + id + "'");
  auto instance = cluster::InstanceFromJson(it->second);
  if (!instance.ok()) return SendError(res, 500, instance.status().ToString());
  // Pending again: the leader places it afresh on the nodes alive now.
  instance->status = cluster::InstanceStatus::kPending;
  instance->reason = "rebalance requested";
  auto version = node_.ProposeChange(
      {cluster::ChangeKind::kPutPlacement, id, cluster::InstanceToJson(*instance)}, kProposeTimeoutMs);
  if (!version.ok()) return SendError(res, 503, version.status().ToString());
  SendJson(res, 202, {{"id", id}, {"rebalancing", true}, {"version", *version}});
}

void ClusterApi::Models(httplib::Response& res) {
  json data = json::array();
  for (const auto& v : cluster::ListInstances(node_.Snapshot().state)) {
    data.push_back({{"id", v.instance.id}, {"object", "model"}, {"owned_by", "cohort"},
                    {"model", v.instance.model}, {"ready", v.ready()}});
  }
  SendJson(res, 200, {{"object", "list"}, {"data", data}});
}

void ClusterApi::Forward(const httplib::Request& req, httplib::Response& res) {
  std::string model;
  if (req.method == "POST") {
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_object() && body.contains("model") && body["model"].is_string()) model = body["model"];
  } else if (req.has_param("model")) {
    model = req.get_param_value("model");
  }
  const auto views = cluster::ListInstances(node_.Snapshot().state);
  const cluster::InstanceView* target = cluster::FindInstance(views, model);
  if (target == nullptr) target = cluster::FindInstance(views, "");  // like a one-model server
  if (target == nullptr) return SendError(res, 404, "no model instance on this cluster (POST /v1/instances)");
  if (!target->ready()) {
    std::string why = "instance " + target->instance.id + " is " + target->state;
    if (!target->instance.reason.empty()) why += ": " + target->instance.reason;
    if (target->run.has_value() && !target->run->error.empty()) why += ": " + target->run->error;
    return SendError(res, 503, why);
  }
  ForwardOptions forward;
  forward.read_timeout_s = options_.forward_read_timeout_s;
  const std::string coordinator = target->instance.coordinator;
  if (coordinator != node_.id().Hex()) forward.coordinator_lost = [this, coordinator] { return WhyLost(coordinator); };
  ForwardRequest(target->run->api, req, res, forward);
}

std::string ClusterApi::WhyLost(const std::string& node) const {
  const cluster::ClusterSnapshot snap = node_.Snapshot();
  for (const cluster::MemberView& m : snap.members) {
    if (m.id.Hex() != node) continue;
    if (m.liveness == cluster::Liveness::kAlive) return "";
    std::string why = "node ";
    why += m.name;
    why += " is ";
    why += cluster::LivenessName(m.liveness);
    why += " (no heartbeat for ";
    why += std::to_string(m.silent_ms);
    why += " ms)";
    return why;
  }
  std::string why = "node ";
  why += node;
  why += " left the cluster";
  return why;
}

}  // namespace cohort::app
