// POST /v1/plan: what placing a model would do, without placing it. The body is the one POST
// /v1/instances takes ("model", optional "layout", "nodes"); the answer lists every layout the
// planner scored on the live nodes (predicted tokens/s, time to first token, weight and KV
// bytes per node, whether it fits), which of them placing would choose, or why none fits.
// The dashboard shows it before its "Place" button is pressed.
#pragma once

#include <httplib.h>

#include <string>

#include "cluster/cluster_node.h"
#include "cluster/reconciler.h"

namespace cohort::server {

// Borrowed: `node` and `reconciler` outlive the call. Writes the JSON or the 4xx/503 into
// `res`; changes nothing in the agreed state beyond registering the model file, as POST
// /v1/instances would.
void PlanPreview(cluster::ClusterNode& node, cluster::Reconciler& reconciler, const std::string& default_layout,
                 int default_nodes, const httplib::Request& req, httplib::Response& res);

}  // namespace cohort::server
