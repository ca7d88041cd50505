// The public HTTP API of a cluster node (`cohort serve --cluster`): the cluster and its
// instances (GET /v1/cluster, GET/POST /v1/instances, GET/DELETE /v1/instances/ID, POST
// /v1/instances/ID/rebalance), and the OpenAI routes, which it forwards to the coordinator of
// the instance a request names (server-sent events relayed chunk by chunk). Any node answers
// any request.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cluster/cluster_node.h"
#include "cluster/instance.h"
#include "core/log.h"
#include "core/status.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace cohort::app {

struct ClusterApiOptions {
  std::string host = "127.0.0.1";
  int port = 8080;               // 0: any free port
  int http_threads = 64;
  size_t max_body_bytes = 1 << 20;
  int forward_read_timeout_s = 30;  // a coordinator silent this long ends the request (503)
  int default_nodes = 0;            // POST /v1/instances without "nodes"
  std::string default_layout = "tp";
  std::vector<std::string> api_keys;  // accepted Bearer keys on every route but /health (none: open)
};

class ClusterApi {
 public:
  // Resolves a model path or name to the cluster's entry for it (registering a local file).
  using ModelResolver = std::function<Result<cluster::ModelEntry>(const std::string& path_or_name)>;

  // Borrowed: `node` and `log` outlive the API.
  ClusterApi(cluster::ClusterNode& node, ModelResolver resolve, const ClusterApiOptions& options,
             Logger& log);
  ~ClusterApi();

  Result<int> Bind();  // the port
  Status Serve();      // until Stop()
  void Stop();

 private:
  void AddRoutes();
  void CreateInstance(const httplib::Request& req, httplib::Response& res);
  void DeleteInstance(const std::string& id, httplib::Response& res);
  void Rebalance(const std::string& id, httplib::Response& res);
  void Models(httplib::Response& res);
  void Forward(const httplib::Request& req, httplib::Response& res);
  // Why a forwarded request should give up on `node` (id hex): the membership sees it
  // suspect, dead or gone; "" while it is alive.
  std::string WhyLost(const std::string& node) const;

  cluster::ClusterNode& node_;
  ModelResolver resolve_;
  ClusterApiOptions options_;
  Logger& log_;
  std::unique_ptr<httplib::Server> http_;
};

struct ForwardOptions {
  int read_timeout_s = 30;  // a coordinator silent this long ends the request
  // Why the coordinator should be given up on ("" while the membership sees it alive):
  // asked every poll_ms once nothing came from it for quiet_ms. Unset: only the timeout.
  std::function<std::string()> coordinator_lost;
  int quiet_ms = 1000;
  int poll_ms = 200;
};

// Relays `req` to http://`upstream` and its answer into `res`: plain answers whole with their
// status, event streams chunk by chunk. A coordinator that cannot be reached, or that the
// membership gives up on before it answers, gives 503; one that goes away mid-stream gives
// an SSE error event and the end of the stream.
void ForwardRequest(const std::string& upstream, const httplib::Request& req, httplib::Response& res,
                    const ForwardOptions& options);

}  // namespace cohort::app
