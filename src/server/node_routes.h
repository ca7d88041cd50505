// The routes of `cohort node` (membership only): GET /v1/cluster, the node's view, POST
// /v1/cluster/changes, a change to the agreed state, and the dashboard at / (dashboard.h).
// Registered on an HttpServer, so they share its limits and its API-key check.
#pragma once

#include "cluster/cluster_node.h"
#include "server/http_server.h"

namespace cohort::server {

// Borrowed: `node` outlives `server`.
void AddNodeRoutes(HttpServer& server, cluster::ClusterNode& node);

}  // namespace cohort::server
