// InstanceStore: the instances a node remembers in its state directory (instances.json), so
// a cluster restarted as a whole brings them back. Each node keeps what was asked for (id,
// model, layout, node count; never a placement, which the leader makes afresh) and, for the
// models it holds, the path of its copy, so the restarted cluster can register the model
// again before the instance is proposed.
#pragma once

#include <string>
#include <vector>

#include "cluster/instance.h"
#include "core/status.h"

namespace cohort::cluster {

struct StoredInstance {
  std::string id;
  std::string model;       // ModelEntry name
  std::string layout;
  int nodes = 0;
  std::string model_path;  // this node's copy of the model ("": held elsewhere)
  bool operator==(const StoredInstance&) const = default;
};

// What `records` asks for, with the paths `held` (sha256 -> path) gives this node's copies.
std::vector<StoredInstance> StoredInstancesOf(const Records& records, const std::map<std::string, std::string>& held);

// Writes `instances` to `path` (a temporary file renamed over it: a crash leaves the old or
// the new list, never half of one).
Status SaveInstances(const std::string& path, const std::vector<StoredInstance>& instances);
// The stored list; empty when `path` does not exist.
Result<std::vector<StoredInstance>> LoadInstances(const std::string& path);

// The request part of a stored instance, pending placement.
Instance PendingInstanceOf(const StoredInstance& stored);

}  // namespace cohort::cluster
