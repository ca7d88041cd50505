// The HTTP routes of a cluster node (`cohort serve --cluster`): the cluster and its instances
// (GET /v1/cluster, GET/POST /v1/instances, GET/DELETE /v1/instances/ID, POST
// /v1/instances/ID/rebalance, POST /v1/plan (plan_preview.h), GET /v1/models, GET /health,
// and the dashboard at / (dashboard.h)), and ClusterRouter, which sends an
// OpenAI request to the instance it names: served here when this node coordinates it, else
// relayed to its coordinator. Any node answers any request.
#pragma once

#include <string>

#include "cluster/cluster_node.h"
#include "cluster/reconciler.h"
#include "server/http_server.h"
#include "server/router.h"

namespace cohort::server {

struct ClusterRoutesOptions {
  int default_nodes = 0;              // POST /v1/instances without "nodes"
  std::string default_layout = "tp";  // ... without "layout"
};

class ClusterRouter final : public InstanceRouter {
 public:
  // Borrowed: both outlive the router.
  ClusterRouter(cluster::ClusterNode& node, const cluster::InstanceHost& host) : node_(node), host_(host) {}
  // The instance with that id, else the first ready one of that model, else the first ready
  // instance at all (like a one-model server).
  Result<RouteTarget> Route(const std::string& model) override;
  bool ResumesStreams() const override { return true; }
  // The cluster's instances; `local` set for those this node coordinates.
  std::vector<ModelEntry> Models() override;

 private:
  // Why a relayed request should give up on `node` (id hex): the membership sees it suspect,
  // dead or gone; "" while it is alive.
  std::string WhyLost(const std::string& node) const;

  cluster::ClusterNode& node_;
  const cluster::InstanceHost& host_;
};

// Adds the cluster's routes to `server`. Borrowed: `node` and `reconciler` outlive it.
void AddClusterRoutes(HttpServer& server, cluster::ClusterNode& node, cluster::Reconciler& reconciler,
                      const ClusterRoutesOptions& options);

}  // namespace cohort::server
