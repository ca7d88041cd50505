// A cluster-like InstanceRouter for the server's relay tests: the instance "demo" at an
// epoch on a loopback port, moved (or made unroutable) when the test says so, as a cluster
// re-places an instance.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "server/router.h"

namespace cohort::server {

class MovingRouter final : public InstanceRouter {
 public:
  // The instance at `epoch_` on 127.0.0.1:`port_`, or `status_` when that is not ok.
  Result<RouteTarget> Route(const std::string&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!status_.ok()) return status_;
    RouteTarget t;
    t.instance_id = "demo";
    t.epoch = epoch_;
    t.api = "127.0.0.1:" + std::to_string(port_);
    t.upstream = t.api;
    return t;
  }
  bool ResumesStreams() const override { return true; }
  std::vector<ModelEntry> Models() override { return {{"demo", "demo", true, nullptr}}; }
  void Move(uint64_t epoch, int port, Status status = Status::Ok()) {
    std::lock_guard<std::mutex> lock(mutex_);
    epoch_ = epoch;
    port_ = port;
    status_ = std::move(status);
  }

 private:
  std::mutex mutex_;
  uint64_t epoch_ = 0;
  int port_ = 0;
  Status status_;
};

}  // namespace cohort::server
