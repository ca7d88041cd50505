// AddNodeRoutes; see node_routes.h.
#include "server/node_routes.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "server/dashboard.h"

namespace cohort::server {

void AddNodeRoutes(HttpServer& server, cluster::ClusterNode& node) {
  cluster::ClusterNode* n = &node;
  server.routes().Get("/v1/cluster", [n](const httplib::Request&, httplib::Response& res) {
    res.set_content(cluster::SnapshotToJson(n->Snapshot()).dump(2), "application/json");
  });
  server.routes().Post("/v1/cluster/changes", [n](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    auto change = cluster::ChangeFromJson(body);
    Result<uint64_t> version = change.ok() ? n->ProposeChange(*change) : Result<uint64_t>(change.status());
    if (!version.ok()) return SendStatus(res, version.status());
    res.set_content(nlohmann::json{{"version", *version}}.dump(), "application/json");
  });
  MountDashboard(server);
}

}  // namespace cohort::server
