// PlanPreview; see plan_preview.h.
#include "server/plan_preview.h"

#include <nlohmann/json.hpp>

#include "cluster/placer.h"
#include "server/http_server.h"

namespace cohort::server {
namespace {

using nlohmann::json;

// "single", "tp", "pp" or "hybrid", from the layout's shape (labels carry weights too).
const char* KindOf(const plan::LayoutSpec& spec) {
  const auto& stages = spec.stage_rank_weights;
  if (stages.size() == 1) return stages[0].size() == 1 ? "single" : "tp";
  for (const auto& s : stages) {
    if (s.size() != 1) return "hybrid";
  }
  return "pp";
}

json PredictionJson(const cluster::PlacementInput& in, const plan::Prediction& p, int want_nodes) {
  json ranks = json::array();
  for (const plan::RankCost& r : p.ranks) {
    const cluster::PlacementNode& n = in.candidates[static_cast<size_t>(r.node)];
    ranks.push_back({{"rank", r.rank}, {"node", n.service.id}, {"name", r.node_name},
                     {"weight_bytes", r.weight_bytes}, {"kv_bytes", r.kv_bytes},
                     {"memory_bytes", r.memory_bytes}, {"usable_bytes", r.usable_bytes}, {"fits", r.fits()}});
  }
  const bool count_ok = want_nodes <= 0 || static_cast<int>(p.ranks.size()) == want_nodes;
  return {{"label", p.layout.label},   {"kind", KindOf(p.layout.spec)},
          {"fits", p.fits},            {"nodes", p.ranks.size()},
          {"eligible", p.fits && count_ok},
          {"gen_tok_s", p.gen_tok_s_b1}, {"gen_tok_s_batch", p.gen_tok_s_batch},
          {"prompt_tok_s", p.prompt_tok_s}, {"ttft_s", p.ttft_s},
          {"max_memory_bytes", p.max_memory_bytes()}, {"ranks", ranks}};
}

}  // namespace

void PlanPreview(cluster::ClusterNode& node, cluster::Reconciler& reconciler, const std::string& default_layout,
                 int default_nodes, const httplib::Request& req, httplib::Response& res) {
  const json body = json::parse(req.body, nullptr, false);
  if (!body.is_object() || !body.contains("model") || !body["model"].is_string()) {
    return SendStatus(res, InvalidArgument("body must be a JSON object with \"model\": a GGUF path or a model name"));
  }
  const json layout = body.value("layout", json(default_layout));
  const json nodes = body.value("nodes", json(default_nodes));
  if (!layout.is_string()) return SendStatus(res, InvalidArgument("layout: a string"));
  if (!nodes.is_number_integer() || nodes.get<int64_t>() < 0 || nodes.get<int64_t>() > 64) {
    return SendStatus(res, InvalidArgument("nodes: 0..64"));
  }
  auto model = reconciler.ResolveModel(body["model"].get<std::string>());
  if (!model.ok()) return SendStatus(res, model.status());

  const cluster::ClusterSnapshot snap = node.Snapshot();
  const cluster::Records records = cluster::Records::Of(snap.state);
  const cluster::Placer::LiveSet live = cluster::Placer::Live(snap);
  cluster::Instance instance;
  instance.id = model->name;
  instance.model = model->name;
  instance.layout = layout.get<std::string>();
  instance.nodes = nodes.get<int>();
  auto input = cluster::Placer::InputFor(snap, records, live, instance, reconciler.placer_options());
  if (!input.ok()) return SendStatus(res, input.status());
  auto plans = cluster::PlanPlacement(*input);
  if (!plans.ok()) return SendStatus(res, plans.status());

  const int want_nodes = std::min<int>(instance.nodes, static_cast<int>(input->candidates.size()));
  json candidates = json::array();
  for (const plan::Prediction& p : plans->candidates) candidates.push_back(PredictionJson(*input, p, want_nodes));
  for (const plan::Prediction& p : plans->too_big) candidates.push_back(PredictionJson(*input, p, want_nodes));
  json rejected = json::array();
  for (const plan::RejectedLayout& r : plans->rejected) rejected.push_back({{"label", r.label}, {"reason", r.reason}});
  // The choice is PlaceInstance's own, so the preview cannot disagree with the placement.
  cluster::Instance chosen = instance;
  const Status placed = cluster::PlaceInstance(*input, &chosen);
  json out = {{"model", model->name},
              {"file_bytes", model->file_bytes},
              {"layout", instance.layout},
              {"nodes", instance.nodes},
              {"live_nodes", input->candidates.size()},
              {"context_tokens", input->context_tokens},
              {"sequences", input->sequences},
              {"link", {{"name", input->link.name}, {"latency_us", input->link.latency_s * 1e6},
                        {"bandwidth_Bps", input->link.bandwidth_Bps}}},
              {"candidates", candidates},
              {"rejected", rejected},
              {"explanation", plans->explanation}};
  if (placed.ok()) {
    out["choice"] = {{"plan", chosen.plan_label}, {"predicted_tok_s", chosen.predicted_tok_s}};
  } else {
    out["choice"] = nullptr;
    out["unplaced"] = placed.message();
  }
  res.status = 200;
  res.set_content(out.dump(2), "application/json");
}

}  // namespace cohort::server
