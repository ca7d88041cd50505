// Model instances on a cluster as data: what each node offers (its worker service, its API,
// its memory budget, the model files it holds), what a user asked for (an instance of a model
// with a layout), where the leader put it (ranks on nodes, shares, shard bytes) and how its
// coordinator reports it. Placement is a pure function over the live nodes, so it is tested
// without a network; the entries travel in the agreed ClusterState (cluster_state.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/cluster_state.h"
#include "plan/hardware.h"
#include "plan/model_shape.h"
#include "plan/planner.h"
#include "plan/shard_plan.h"
#include "core/progress.h"
#include "core/status.h"

namespace cohort::cluster {

// What one node offers, published by the node itself.
struct NodeService {
  std::string id;               // node id, hex
  std::string name;
  std::string worker;           // host:port of its parallel::ServeOneJob listener
  std::string api;              // host:port of its public HTTP API
  int64_t max_memory_bytes = 0; // budget for shards + KV (0: the node's available memory)
  std::map<std::string, std::string> files;  // sha256 -> local path of the models it holds
  bool operator==(const NodeService&) const = default;
};
nlohmann::json NodeServiceToJson(const NodeService& s);
Result<NodeService> NodeServiceFromJson(const nlohmann::json& j);

// A model known to the cluster: registered by a node that has the file.
struct ModelEntry {
  std::string name;       // file stem, the "model" of API requests
  std::string path;       // where the registering node has it
  std::string sha256;     // hex, of the whole file
  int64_t file_bytes = 0;
  int n_ctx_train = 0;
  plan::ModelShape shape;
  plan::QuantScheme quant;
};
nlohmann::json ModelEntryToJson(const ModelEntry& m);
Result<ModelEntry> ModelEntryFromJson(const nlohmann::json& j);

// One rank of a placed instance.
struct RankPlacement {
  std::string node;         // node id hex
  std::string name;
  std::string worker;       // its worker service (unused for rank 0, the coordinator)
  double weight_bytes = 0;  // its shard, as the planner counts it
  double kv_bytes = 0;
};

enum class InstanceStatus {
  kPending,   // asked for; the leader has not placed it yet
  kPlaced,    // ranks chosen; the coordinator loads it (its RunReport says when it is ready)
  kUnplaced,  // no layout fits the live nodes (reason says why); retried as nodes change
};
const char* InstanceStatusName(InstanceStatus s);

// An instance: the request and, once placed, the placement. Written by the API node that
// accepted the request (kPending) and by the leader (kPlaced / kUnplaced).
struct Instance {
  std::string id;
  std::string model;          // ModelEntry name
  std::string layout = "tp";  // the planner's layout request: auto, single, tp, pp, hybrid, ...
  int nodes = 0;              // this many nodes, or all live ones when fewer (0: as the planner finds best)
  uint64_t epoch = 0;         // bumped by each placement; a coordinator runs one epoch
  InstanceStatus status = InstanceStatus::kPending;
  std::string reason;         // why it is unplaced, or why it was last re-placed
  // The placement (kPlaced).
  std::string coordinator;    // node id hex of rank 0
  std::string model_path;     // the coordinator's copy
  std::string model_sha256;   // of that file: ranks without it are streamed their shares
  std::string plan_label;     // the planner's label, e.g. "tp3"
  // The plan the planner scored, exactly: the coordinator runs it (ranks in `ranks` order).
  plan::ShardPlan plan;
  std::vector<RankPlacement> ranks;
  double predicted_tok_s = 0;
};
nlohmann::json InstanceToJson(const Instance& i);
Result<Instance> InstanceFromJson(const nlohmann::json& j);

enum class RunState {
  kReady,   // serving
  kFailed,  // did not load, or its model stopped running (error says why)
};
const char* RunStateName(RunState s);

// The coordinator's word on the epoch it runs.
struct RunReport {
  uint64_t epoch = 0;
  RunState state = RunState::kFailed;
  std::string error;
  std::string api;    // host:port of the coordinator's API, which serves the instance
  std::string relay;  // host:port other nodes relay its requests to (server/relay_channel.h)
  std::string coordinator;
  // The plan its ranks run (a distributed instance; empty stages otherwise), so what the
  // planner predicted can be checked against what runs.
  plan::ShardPlan plan;
};
nlohmann::json RunReportToJson(const RunReport& r);
Result<RunReport> RunReportFromJson(const nlohmann::json& j);

// How far the loading of an instance's epoch has come, as its coordinator last reported it
// (about once a second while it loads): over all its ranks, and per rank.
struct RankProgress {
  std::string node;   // node id hex
  std::string name;
  std::string phase;  // "start", "transfer" (its share streamed to it), "load" (read from disk), "done"
  ProgressFigures figures;
};
struct LoadProgress {
  uint64_t epoch = 0;
  // "start", "transfer" while any rank's share travels, "load" while any rank reads its
  // share, "connect" once every byte is in (the ranks connect their links).
  std::string phase = "start";
  ProgressFigures figures;  // every rank's transfer and load bytes together
  std::vector<RankProgress> ranks;
};
nlohmann::json ProgressFiguresToJson(const ProgressFigures& f);
nlohmann::json LoadProgressToJson(const LoadProgress& p);
Result<LoadProgress> LoadProgressFromJson(const nlohmann::json& j);

// Where an instance stands, as the API reports it.
enum class InstanceState { kPending, kUnplaced, kLoading, kReady, kFailed };
const char* InstanceStateName(InstanceState s);

// The agreed state's records, typed. ClusterState stores them as JSON under keys ("node:",
// "model:" and "run:" entries of ClusterState::models, instances as its placements); only
// Records::Of and the change makers below know that layout. An entry that does not parse is
// left out (a newer node's record, or a damaged one).
struct Records {
  std::map<std::string, NodeService> nodes;   // by node id hex
  std::map<std::string, ModelEntry> models;   // by name
  std::map<std::string, RunReport> runs;      // by instance id (any epoch)
  std::map<std::string, LoadProgress> progress;  // by instance id (any epoch)
  std::map<std::string, Instance> instances;  // by instance id
  // Model files `cohort rm` removed, sha256 -> name: every node deletes its copies in its
  // models and cache directories. Registering the same file again clears the entry.
  std::map<std::string, std::string> removed;
  static Records Of(const ClusterState& state);
};
Change PutNodeService(const NodeService& service);
Change PutModelEntry(const ModelEntry& entry);
Change PutRunReport(const std::string& instance_id, const RunReport& report);
Change DeleteRunReport(const std::string& instance_id);
Change PutLoadProgress(const std::string& instance_id, const LoadProgress& progress);
Change DeleteLoadProgress(const std::string& instance_id);
Change PutInstance(const Instance& instance);
Change DeleteInstance(const std::string& instance_id);
Change DeleteModelEntry(const std::string& name);
Change PutRemovedModel(const std::string& name, const std::string& sha256);
Change DeleteRemovedModel(const std::string& sha256);

// An instance with what its coordinator reported for the epoch it is placed at.
struct InstanceView {
  Instance instance;
  std::optional<RunReport> run;  // the current epoch's report, if any
  std::optional<LoadProgress> progress;  // the current epoch's, while it loads
  InstanceState state = InstanceState::kPending;
  bool ready() const { return state == InstanceState::kReady; }
  // Ready, unplaced or failed: nothing more happens until something changes.
  bool settled() const { return state == InstanceState::kReady || state == InstanceState::kUnplaced || state == InstanceState::kFailed; }
};
std::vector<InstanceView> ListInstances(const ClusterState& state);
nlohmann::json InstanceViewToJson(const InstanceView& view);
// Where a request naming `model` goes: the instance with that id, else the first ready one of
// that model name, else the first of that name; an empty name picks the first ready instance.
// Null when none matches.
const InstanceView* FindInstance(const std::vector<InstanceView>& views, const std::string& model);

// A live node as the placement sees it.
struct PlacementNode {
  NodeService service;
  plan::NodeProfile profile;  // memory_bytes x usable fraction is its budget
};

struct PlacementInput {
  ModelEntry model;
  std::string layout = "tp";
  int nodes = 0;               // this many, or every candidate when fewer (0: any)
  int context_tokens = 512;    // KV per sequence
  int sequences = 4;           // KV slots
  std::vector<PlacementNode> candidates;  // live nodes, in a stable order
  plan::LinkProfile link;
};

// Chooses ranks for `input.model` on the candidates with the planner (best predicted
// generation speed that fits every node's budget; rank 0 on a node holding the file) and
// fills the placement fields of `instance`. Fails (kResourceExhausted, with the reason) when
// nothing fits, kNotFound when no live node holds the file.
Status PlaceInstance(const PlacementInput& input, Instance* instance);
// Every layout the planner considers for `input` (fitting ones best first, the too-big ones,
// the rejected ones), before the node-count and coordinator rules PlaceInstance applies.
Result<plan::PlanResult> PlanPlacement(const PlacementInput& input);

// A node's budget as the planner's profile: --max-memory when given (all of it usable),
// otherwise what the node measured.
plan::NodeProfile BudgetProfile(const std::string& name, double memory_total_bytes,
                          double memory_available_bytes, double bandwidth_Bps, double flops,
                          int64_t max_memory_bytes);

}  // namespace cohort::cluster
