// Instance entries as JSON and the placement of an instance on live nodes; see instance.h.
#include "cluster/instance.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "core/check.h"
#include "plan/cost_model.h"
#include "plan/planner.h"

namespace cohort::cluster {
namespace {

// Where the records live in ClusterState::models (see Records).
constexpr const char* kNodeKeyPrefix = "node:";
constexpr const char* kModelKeyPrefix = "model:";
constexpr const char* kRunKeyPrefix = "run:";
constexpr const char* kProgressKeyPrefix = "progress:";
constexpr const char* kRemovedKeyPrefix = "removed:";

using nlohmann::json;

constexpr double kMiB = 1024.0 * 1024.0;
// Stand-ins for a node whose benchmarks have not finished: the planner needs positive
// figures, and a plan made with them is only about memory, which is always measured.
constexpr double kDefaultBandwidthBps = 10e9;
constexpr double kDefaultFlops = 100e9;

json ShapeToJson(const plan::ModelShape& s) {
  return {{"name", s.name}, {"n_layer", s.n_layer}, {"n_embd", s.n_embd}, {"n_head", s.n_head},
          {"n_head_kv", s.n_head_kv}, {"head_dim", s.head_dim}, {"q_lora_rank", s.q_lora_rank},
          {"kv_lora_rank", s.kv_lora_rank}, {"qk_nope_dim", s.qk_nope_dim},
          {"qk_rope_dim", s.qk_rope_dim}, {"v_head_dim", s.v_head_dim}, {"n_ff", s.n_ff},
          {"n_leading_dense", s.n_leading_dense}, {"n_expert", s.n_expert},
          {"n_expert_used", s.n_expert_used}, {"n_ff_expert", s.n_ff_expert},
          {"n_expert_shared", s.n_expert_shared}, {"n_vocab", s.n_vocab},
          {"tied_embeddings", s.tied_embeddings}};
}

plan::ModelShape ShapeFromJson(const json& j) {
  plan::ModelShape s;
  s.name = j.at("name").get<std::string>();
  for (auto [key, field] : std::initializer_list<std::pair<const char*, int plan::ModelShape::*>>{
           {"n_layer", &plan::ModelShape::n_layer}, {"n_embd", &plan::ModelShape::n_embd},
           {"n_head", &plan::ModelShape::n_head}, {"n_head_kv", &plan::ModelShape::n_head_kv},
           {"head_dim", &plan::ModelShape::head_dim}, {"q_lora_rank", &plan::ModelShape::q_lora_rank},
           {"kv_lora_rank", &plan::ModelShape::kv_lora_rank}, {"qk_nope_dim", &plan::ModelShape::qk_nope_dim},
           {"qk_rope_dim", &plan::ModelShape::qk_rope_dim}, {"v_head_dim", &plan::ModelShape::v_head_dim},
           {"n_ff", &plan::ModelShape::n_ff}, {"n_leading_dense", &plan::ModelShape::n_leading_dense},
           {"n_expert", &plan::ModelShape::n_expert}, {"n_expert_used", &plan::ModelShape::n_expert_used},
           {"n_ff_expert", &plan::ModelShape::n_ff_expert}, {"n_expert_shared", &plan::ModelShape::n_expert_shared},
           {"n_vocab", &plan::ModelShape::n_vocab}}) {
    s.*field = j.at(key).get<int>();
  }
  s.tied_embeddings = j.at("tied_embeddings").get<bool>();
  return s;
}

json QuantToJson(const plan::QuantScheme& q) {
  return {{"name", q.name}, {"bits_expert", q.bits_expert}, {"bits_dense", q.bits_dense},
          {"bits_embd", q.bits_embd}, {"bits_output", q.bits_output}, {"block", q.block}};
}

plan::QuantScheme QuantFromJson(const json& j) {
  plan::QuantScheme q;
  q.name = j.at("name").get<std::string>();
  q.bits_expert = j.at("bits_expert").get<double>();
  q.bits_dense = j.at("bits_dense").get<double>();
  q.bits_embd = j.at("bits_embd").get<double>();
  q.bits_output = j.at("bits_output").get<double>();
  q.block = j.at("block").get<int>();
  return q;
}

// Runs `parse` and turns a JSON exception, or a field it rejected (std::invalid_argument),
// into a Status.
template <typename T, typename F>
Result<T> Parse(const char* what, F&& parse) {
  try {
    return parse();
  } catch (const json::exception& e) {
    return Corrupt(std::string("malformed ") + what + ": " + e.what());
  } catch (const std::invalid_argument& e) {
    return Corrupt(std::string("malformed ") + what + ": " + e.what());
  }
}

// A plan inside an entry: the ShardPlan's own versioned JSON as an object (null: none yet).
json PlanToJson(const plan::ShardPlan& p) {
  if (p.stages.empty()) return nullptr;
  return json::parse(p.ToJson());
}

plan::ShardPlan PlanFromJson(const json& j, const char* what) {
  if (j.is_null()) return plan::ShardPlan{};
  auto parsed = plan::ShardPlan::FromJson(j.dump());
  if (!parsed.ok()) {
    throw std::invalid_argument(std::string(what) + " plan: " + parsed.status().message());
  }
  return std::move(parsed).value();
}

bool HasFile(const PlacementNode& n, const std::string& sha) { return n.service.files.count(sha) > 0; }

// A layout of the node count asked for (all of them when fewer are live).
bool OfWantedSize(const plan::Prediction& p, int want_nodes) {
  return want_nodes <= 0 || static_cast<int>(p.ranks.size()) == want_nodes;
}

// Why no layout was placed, naming what stopped the closest one: a node's memory budget, a
// shard plan the model's shape does not allow, or a node count no fitting layout has.
std::string WhyNothingFits(const PlacementInput& in, const plan::PlanResult& plans, int want_nodes) {
  std::string why = fmt::format("{} ({:.2f} MiB) fits on no {} layout of the {} live node(s)", in.model.name,
                                in.model.file_bytes / kMiB, in.layout.empty() ? "auto" : in.layout,
                                in.candidates.size());
  if (want_nodes > 0) why += fmt::format(" with {} node(s)", want_nodes);
  // The layout that came closest: the smallest worst overflow of a node's budget.
  const plan::Prediction* closest = nullptr;
  double closest_over = 0;
  for (const plan::Prediction& p : plans.too_big) {
    if (!OfWantedSize(p, want_nodes)) continue;
    double over = 0;
    for (const plan::RankCost& r : p.ranks) over = std::max(over, r.memory_bytes - r.usable_bytes);
    if (closest == nullptr || over < closest_over) {
      closest = &p;
      closest_over = over;
    }
  }
  if (closest != nullptr) {
    for (const plan::RankCost& r : closest->ranks) {
      if (r.fits()) continue;
      return why + fmt::format("; best try {}: node {} needs {:.2f} MiB, its budget is {:.2f} MiB",
                               closest->layout.label, r.node_name, r.memory_bytes / kMiB, r.usable_bytes / kMiB);
    }
  }
  if (!plans.rejected.empty()) {
    return why + fmt::format("; {} has no valid shard plan: {}", plans.rejected.front().label,
                             plans.rejected.front().reason);
  }
  std::string fitting;
  for (const plan::Prediction& p : plans.candidates) fitting += (fitting.empty() ? "" : ", ") + p.layout.label;
  if (!fitting.empty()) return why + "; the layouts that fit use other node counts: " + fitting;
  return why;
}

}  // namespace

const char* RunStateName(RunState s) {
  switch (s) {
    case RunState::kReady: return "ready";
    case RunState::kFailed: return "failed";
  }
  return "failed";
}

const char* InstanceStateName(InstanceState s) {
  switch (s) {
    case InstanceState::kPending: return "pending";
    case InstanceState::kUnplaced: return "unplaced";
    case InstanceState::kLoading: return "loading";
    case InstanceState::kReady: return "ready";
    case InstanceState::kFailed: return "failed";
  }
  return "pending";
}

const char* InstanceStatusName(InstanceStatus s) {
  switch (s) {
    case InstanceStatus::kPending: return "pending";
    case InstanceStatus::kPlaced: return "placed";
    case InstanceStatus::kUnplaced: return "unplaced";
  }
  return "pending";
}

json NodeServiceToJson(const NodeService& s) {
  return {{"id", s.id}, {"name", s.name}, {"worker", s.worker}, {"api", s.api},
          {"max_memory_bytes", s.max_memory_bytes}, {"files", s.files}};
}

Result<NodeService> NodeServiceFromJson(const json& j) {
  return Parse<NodeService>("node service", [&] {
    NodeService s;
    s.id = j.at("id").get<std::string>();
    s.name = j.at("name").get<std::string>();
    s.worker = j.at("worker").get<std::string>();
    s.api = j.at("api").get<std::string>();
    s.max_memory_bytes = j.at("max_memory_bytes").get<int64_t>();
    s.files = j.at("files").get<std::map<std::string, std::string>>();
    return s;
  });
}

json ModelEntryToJson(const ModelEntry& m) {
  return {{"name", m.name}, {"path", m.path}, {"sha256", m.sha256}, {"file_bytes", m.file_bytes},
          {"n_ctx_train", m.n_ctx_train}, {"shape", ShapeToJson(m.shape)}, {"quant", QuantToJson(m.quant)}};
}

Result<ModelEntry> ModelEntryFromJson(const json& j) {
  return Parse<ModelEntry>("model entry", [&] {
    ModelEntry m;
    m.name = j.at("name").get<std::string>();
    m.path = j.at("path").get<std::string>();
    m.sha256 = j.at("sha256").get<std::string>();
    m.file_bytes = j.at("file_bytes").get<int64_t>();
    m.n_ctx_train = j.at("n_ctx_train").get<int>();
    m.shape = ShapeFromJson(j.at("shape"));
    m.quant = QuantFromJson(j.at("quant"));
    return m;
  });
}

json InstanceToJson(const Instance& i) {
  json ranks = json::array();
  for (const RankPlacement& r : i.ranks) {
    ranks.push_back({{"node", r.node}, {"name", r.name}, {"worker", r.worker},
                     {"weight_bytes", r.weight_bytes}, {"kv_bytes", r.kv_bytes}});
  }
  return {{"id", i.id}, {"model", i.model}, {"layout", i.layout}, {"nodes", i.nodes},
          {"epoch", i.epoch}, {"status", InstanceStatusName(i.status)}, {"reason", i.reason},
          {"coordinator", i.coordinator}, {"model_path", i.model_path}, {"model_sha256", i.model_sha256}, {"plan", i.plan_label},
          {"shard_plan", PlanToJson(i.plan)}, {"ranks", ranks}, {"predicted_tok_s", i.predicted_tok_s}};
}

Result<Instance> InstanceFromJson(const json& j) {
  return Parse<Instance>("instance", [&] {
    Instance i;
    i.id = j.at("id").get<std::string>();
    i.model = j.at("model").get<std::string>();
    i.layout = j.value("layout", std::string("tp"));
    i.nodes = j.value("nodes", 0);
    i.epoch = j.value("epoch", uint64_t{0});
    const std::string status = j.value("status", std::string("pending"));
    i.status = status == "placed"     ? InstanceStatus::kPlaced
               : status == "unplaced" ? InstanceStatus::kUnplaced
                                      : InstanceStatus::kPending;
    i.reason = j.value("reason", std::string());
    i.coordinator = j.value("coordinator", std::string());
    i.model_path = j.value("model_path", std::string());
    i.model_sha256 = j.value("model_sha256", std::string());
    i.plan_label = j.value("plan", std::string());
    i.plan = PlanFromJson(j.value("shard_plan", json()), "instance");
    for (const json& r : j.value("ranks", json::array())) {
      i.ranks.push_back({r.at("node").get<std::string>(), r.at("name").get<std::string>(),
                         r.at("worker").get<std::string>(), r.at("weight_bytes").get<double>(),
                         r.at("kv_bytes").get<double>()});
    }
    i.predicted_tok_s = j.value("predicted_tok_s", 0.0);
    return i;
  });
}

json RunReportToJson(const RunReport& r) {
  return {{"epoch", r.epoch}, {"state", RunStateName(r.state)}, {"error", r.error}, {"api", r.api}, {"relay", r.relay},
          {"coordinator", r.coordinator}, {"shard_plan", PlanToJson(r.plan)}};
}

Result<RunReport> RunReportFromJson(const json& j) {
  return Parse<RunReport>("run report", [&] {
    RunReport r;
    r.epoch = j.at("epoch").get<uint64_t>();
    const std::string state = j.at("state").get<std::string>();
    if (state != RunStateName(RunState::kReady) && state != RunStateName(RunState::kFailed)) {
      throw std::invalid_argument("unknown run state '" + state + "'");
    }
    r.state = state == RunStateName(RunState::kReady) ? RunState::kReady : RunState::kFailed;
    r.error = j.value("error", std::string());
    r.api = j.value("api", std::string());
    r.relay = j.value("relay", std::string());
    r.coordinator = j.value("coordinator", std::string());
    r.plan = PlanFromJson(j.value("shard_plan", json()), "run report");
    return r;
  });
}

json ProgressFiguresToJson(const ProgressFigures& f) {
  return {{"bytes_done", f.bytes_done}, {"bytes_total", f.bytes_total},
          {"percent", std::round(f.percent() * 10) / 10}, {"rate_bytes_per_s", std::round(f.rate_bytes_per_s)},
          {"eta_s", f.eta_s < 0 ? json() : json(std::round(f.eta_s * 10) / 10)}};
}

namespace {

ProgressFigures ProgressFiguresFromJson(const json& j) {
  ProgressFigures f;
  f.bytes_done = j.at("bytes_done").get<uint64_t>();
  f.bytes_total = j.at("bytes_total").get<uint64_t>();
  f.rate_bytes_per_s = j.at("rate_bytes_per_s").get<double>();
  f.eta_s = j.at("eta_s").is_null() ? -1 : j.at("eta_s").get<double>();
  return f;
}

}  // namespace

json LoadProgressToJson(const LoadProgress& p) {
  json j = ProgressFiguresToJson(p.figures);
  j["epoch"] = p.epoch;
  j["phase"] = p.phase;
  json ranks = json::array();
  for (const RankProgress& r : p.ranks) {
    json e = ProgressFiguresToJson(r.figures);
    e["node"] = r.node;
    e["name"] = r.name;
    e["phase"] = r.phase;
    ranks.push_back(std::move(e));
  }
  j["nodes"] = std::move(ranks);
  return j;
}

Result<LoadProgress> LoadProgressFromJson(const json& j) {
  return Parse<LoadProgress>("load progress", [&] {
    LoadProgress p;
    p.epoch = j.at("epoch").get<uint64_t>();
    p.phase = j.at("phase").get<std::string>();
    p.figures = ProgressFiguresFromJson(j);
    for (const json& e : j.at("nodes")) {
      p.ranks.push_back({e.at("node").get<std::string>(), e.at("name").get<std::string>(),
                         e.at("phase").get<std::string>(), ProgressFiguresFromJson(e)});
    }
    return p;
  });
}

Records Records::Of(const ClusterState& state) {
  Records r;
  for (const auto& [key, value] : state.models) {
    const auto named = [&](const char* prefix) { return key.rfind(prefix, 0) == 0 ? key.substr(std::strlen(prefix)) : ""; };
    if (std::string id = named(kNodeKeyPrefix); !id.empty()) {
      if (auto n = NodeServiceFromJson(value); n.ok()) r.nodes.emplace(id, std::move(*n));
    } else if (std::string name = named(kModelKeyPrefix); !name.empty()) {
      if (auto m = ModelEntryFromJson(value); m.ok()) r.models.emplace(name, std::move(*m));
    } else if (std::string inst = named(kRunKeyPrefix); !inst.empty()) {
      if (auto run = RunReportFromJson(value); run.ok()) r.runs.emplace(inst, std::move(*run));
    } else if (std::string loading = named(kProgressKeyPrefix); !loading.empty()) {
      if (auto p = LoadProgressFromJson(value); p.ok()) r.progress.emplace(loading, std::move(*p));
    } else if (std::string sha = named(kRemovedKeyPrefix); !sha.empty()) {
      if (value.is_object() && value.value("name", json()).is_string()) r.removed.emplace(sha, value["name"].get<std::string>());
    }
  }
  for (const auto& [id, value] : state.placements) {
    if (auto i = InstanceFromJson(value); i.ok()) r.instances.emplace(id, std::move(*i));
  }
  return r;
}

Change PutNodeService(const NodeService& s) { return {ChangeKind::kPutModel, kNodeKeyPrefix + s.id, NodeServiceToJson(s)}; }
Change PutModelEntry(const ModelEntry& m) { return {ChangeKind::kPutModel, kModelKeyPrefix + m.name, ModelEntryToJson(m)}; }
Change PutRunReport(const std::string& id, const RunReport& r) {
  return {ChangeKind::kPutModel, kRunKeyPrefix + id, RunReportToJson(r)};
}
Change DeleteRunReport(const std::string& id) { return {ChangeKind::kDeleteModel, kRunKeyPrefix + id, {}}; }
Change PutLoadProgress(const std::string& id, const LoadProgress& p) {
  return {ChangeKind::kPutModel, kProgressKeyPrefix + id, LoadProgressToJson(p)};
}
Change DeleteLoadProgress(const std::string& id) { return {ChangeKind::kDeleteModel, kProgressKeyPrefix + id, {}}; }
Change PutInstance(const Instance& i) { return {ChangeKind::kPutPlacement, i.id, InstanceToJson(i)}; }
Change DeleteInstance(const std::string& id) { return {ChangeKind::kDeletePlacement, id, {}}; }
Change DeleteModelEntry(const std::string& name) { return {ChangeKind::kDeleteModel, kModelKeyPrefix + name, {}}; }
Change PutRemovedModel(const std::string& name, const std::string& sha256) {
  return {ChangeKind::kPutModel, kRemovedKeyPrefix + sha256, {{"name", name}}};
}
Change DeleteRemovedModel(const std::string& sha256) { return {ChangeKind::kDeleteModel, kRemovedKeyPrefix + sha256, {}}; }

std::vector<InstanceView> ListInstances(const ClusterState& state) {
  const Records records = Records::Of(state);
  std::vector<InstanceView> out;
  for (const auto& [id, instance] : records.instances) {
    InstanceView v;
    v.instance = instance;
    if (auto it = records.runs.find(id); it != records.runs.end() && it->second.epoch == v.instance.epoch) {
      v.run = it->second;
    }
    if (v.instance.status == InstanceStatus::kPending) {
      v.state = InstanceState::kPending;
    } else if (v.instance.status == InstanceStatus::kUnplaced) {
      v.state = InstanceState::kUnplaced;
    } else if (!v.run.has_value()) {
      v.state = InstanceState::kLoading;
      if (auto it = records.progress.find(id); it != records.progress.end() && it->second.epoch == v.instance.epoch) {
        v.progress = it->second;
      }
    } else {
      v.state = v.run->state == RunState::kReady ? InstanceState::kReady : InstanceState::kFailed;
    }
    out.push_back(std::move(v));
  }
  return out;
}

json InstanceViewToJson(const InstanceView& v) {
  json j = InstanceToJson(v.instance);
  j["state"] = InstanceStateName(v.state);
  j["ready"] = v.ready();
  if (v.run.has_value()) {
    j["api"] = v.run->api;
    j["running_plan"] = PlanToJson(v.run->plan);  // what the ranks run (null: whole on one node)
    if (!v.run->error.empty()) j["error"] = v.run->error;
  }
  // While it waits for a placement or loads: how far it has come (nothing known yet: zeros).
  if (v.state == InstanceState::kPending || v.state == InstanceState::kLoading) {
    LoadProgress p = v.progress.value_or(LoadProgress{});
    if (v.state == InstanceState::kPending) p.phase = "placement";
    j["progress"] = LoadProgressToJson(p);
    j["progress"].erase("epoch");
  }
  return j;
}

const InstanceView* FindInstance(const std::vector<InstanceView>& views, const std::string& model) {
  for (const InstanceView& v : views) {
    if (!model.empty() && v.instance.id == model) return &v;
  }
  const InstanceView* any = nullptr;
  for (const InstanceView& v : views) {
    if (!model.empty() && v.instance.model != model) continue;
    if (v.ready()) return &v;
    if (any == nullptr) any = &v;
  }
  return any;
}

plan::NodeProfile BudgetProfile(const std::string& name, double memory_total_bytes,
                          double memory_available_bytes, double bandwidth_Bps, double flops,
                          int64_t max_memory_bytes) {
  plan::NodeProfile p;
  p.name = name;
  if (max_memory_bytes > 0) {
    p.memory_bytes = static_cast<double>(max_memory_bytes);
    p.usable_memory_fraction = 1.0;
    p.source = "--max-memory";
  } else {
    p.memory_bytes = memory_total_bytes > 0 ? memory_total_bytes : 1.0;
    p.usable_memory_fraction =
        memory_total_bytes > 0 ? std::clamp(memory_available_bytes / memory_total_bytes, 0.01, 1.0) : 0.01;
    p.source = "measured";
  }
  p.memory_bandwidth_Bps = bandwidth_Bps > 0 ? bandwidth_Bps : kDefaultBandwidthBps;
  p.flops = flops > 0 ? flops : kDefaultFlops;
  return p;
}

namespace {
int WantedNodes(const PlacementInput& in) {
  return std::min<int>(in.nodes, static_cast<int>(in.candidates.size()));
}
}  // namespace

Result<plan::PlanResult> PlanPlacement(const PlacementInput& in) {
  if (in.candidates.empty()) return Unavailable("no live node");
  if (std::none_of(in.candidates.begin(), in.candidates.end(),
                   [&](const PlacementNode& n) { return HasFile(n, in.model.sha256); })) {
    return NotFound("no live node holds " + in.model.name + " (sha256 " + in.model.sha256.substr(0, 12) + ")");
  }
  plan::PlanRequest req;
  req.model = in.model.shape;
  req.quant = in.model.quant;
  // Rank 0 reads the file and streams every other rank its share, so every layout starts
  // on a node holding it, whatever the measured speeds order first.
  for (size_t i = 0; i < in.candidates.size(); ++i) {
    req.cluster.nodes.push_back(in.candidates[i].profile);
    if (HasFile(in.candidates[i], in.model.sha256)) req.first_rank_nodes.push_back(static_cast<int>(i));
  }
  req.cluster.link = in.link;
  COHORT_ASSIGN_OR_RETURN(req.cluster.stack, plan::FindBuiltinStack("cohort"));
  // A node's budget holds its shard and its KV cache; the runtime's own buffers are small
  // next to them and not counted.
  req.cluster.stack.memory_overhead_bytes = 0;
  req.workload.batch = std::max(1, in.sequences);
  req.workload.context_tokens = std::max(1, in.context_tokens);
  req.workload.prompt_tokens = std::min(512, req.workload.context_tokens);
  req.layout = in.layout.empty() ? "auto" : in.layout;
  return plan::PlanLayouts(req);
}

Status PlaceInstance(const PlacementInput& in, Instance* out) {
  COHORT_ASSIGN_OR_RETURN(plan::PlanResult plans, PlanPlacement(in));
  // "nodes" asks for that many; with fewer alive, as many as there are.
  const int want_nodes = WantedNodes(in);
  for (plan::Prediction& p : plans.candidates) {
    if (!OfWantedSize(p, want_nodes)) continue;
    const PlacementNode& coordinator = in.candidates[p.layout.node_of_rank[0]];
    COHORT_CHECK(HasFile(coordinator, in.model.sha256));
    out->coordinator = coordinator.service.id;
    out->model_path = coordinator.service.files.at(in.model.sha256);
    out->model_sha256 = in.model.sha256;
    out->plan_label = p.layout.label;
    out->plan = p.plan;
    out->ranks.clear();
    for (size_t r = 0; r < p.ranks.size(); ++r) {
      const PlacementNode& n = in.candidates[p.layout.node_of_rank[r]];
      out->ranks.push_back({n.service.id, n.service.name, n.service.worker, p.ranks[r].weight_bytes,
                            p.ranks[r].kv_bytes});
    }
    out->predicted_tok_s = p.gen_tok_s_b1;
    out->status = InstanceStatus::kPlaced;
    return Status::Ok();
  }
  return ResourceExhausted(WhyNothingFits(in, plans, want_nodes));
}

}  // namespace cohort::cluster
