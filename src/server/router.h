// InstanceRouter: where a request naming a model goes — an instance served in this process
// (its engine::ServingInstance), or the node that serves it (a host:port the request is relayed
// to). One HTTP front serves every instance through it: `cohort serve`'s one model
// (SingleInstanceRouter), or a cluster's instances (ClusterRouter, cluster_routes.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/serving.h"

namespace cohort::server {

struct RouteTarget {
  // Served here; the request holds it until it ends.
  std::shared_ptr<engine::ServingInstance> local;
  // Else the node that serves it, and why it should be given up on ("" while it is alive;
  // unset: only the read timeout ends a silent one).
  std::string upstream;
  std::function<std::string()> upstream_lost;
  // A cluster instance's identity and where requests reach the node serving it, local or
  // not (host:port; a cluster node's relay channel), so a broken stream can be resumed on the
  // instance's next placement (epoch).
  std::string instance_id;
  uint64_t epoch = 0;
  std::string api;
};

// One model a router serves, for the listing routes (/v1/models/ID, Ollama's /api/tags).
struct ModelEntry {
  std::string id;     // what requests name
  std::string model;  // the model's name (a cluster instance's model)
  bool ready = true;
  std::shared_ptr<engine::ServingInstance> local;  // when served in this process
};

// Whether a Route() failure means no placement will come to wait for: the instance is gone,
// or no layout fits the nodes left ("... is unplaced", ClusterRouter's words).
inline bool NoPlacementComing(const Status& route_status) {
  return route_status.code() == StatusCode::kNotFound ||
         route_status.message().find(" is unplaced") != std::string::npos;
}

class InstanceRouter {
 public:
  virtual ~InstanceRouter() = default;
  // The target for a request naming `model` ("": the default instance); kNotFound when none
  // matches, kUnavailable when it is not ready.
  virtual Result<RouteTarget> Route(const std::string& model) = 0;
  // Whether a stream broken by a lost node should wait for the instance to be placed again
  // and resume there (a cluster), rather than end with an error.
  virtual bool ResumesStreams() const { return false; }
  // Every model served, ready or not.
  virtual std::vector<ModelEntry> Models() = 0;
};

// One instance, whatever the request names (as llama-server: the model field is echoed).
class SingleInstanceRouter final : public InstanceRouter {
 public:
  explicit SingleInstanceRouter(std::unique_ptr<engine::ServingInstance> instance)
      : instance_(std::move(instance)) {}
  Result<RouteTarget> Route(const std::string&) override {
    RouteTarget t;
    t.local = instance_;
    return t;
  }
  std::vector<ModelEntry> Models() override { return {{instance_->name(), instance_->name(), true, instance_}}; }
  engine::ServingInstance& instance() { return *instance_; }

 private:
  std::shared_ptr<engine::ServingInstance> instance_;
};

}  // namespace cohort::server
