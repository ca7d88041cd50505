// The model-management subcommands: thin callers of server::ApiClient and server::PullModel
// that print tables (or JSON) and progress; see cmd_models.h.
#include "cmd_models.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/byte_size.h"
#include "progress_printer.h"
#include "server/model_pull.h"

namespace cohort::app {
namespace {

using nlohmann::json;

int Fail(const char* command, const Status& status) {
  std::fprintf(stderr, "cohort %s: %s\n", command, status.ToString().c_str());
  return 1;
}

void AddApiOptions(CLI::App* cmd, ManageOptions* o) {
  cmd->add_option("--api", o->api.url, "a cluster node's API")->envname("COHORT_API");
  cmd->add_option("--api-key", o->api.api_key, "Bearer key of that API")->envname("COHORT_API_KEY");
  cmd->add_flag("--json", o->json, "print the API's JSON answer");
}

// "a,b,c" of `list`'s strings, or of each element's `key`. (Appending, not "," + s: GCC 12
// warns falsely about the temporary's memcpy.)
std::string Join(const json& list, const char* key = nullptr) {
  std::string out;
  for (const json& e : list) {
    if (!out.empty()) out += ',';
    out += key == nullptr ? e.get<std::string>() : e.value(key, std::string());
  }
  return out;
}

std::string Mb(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

int PrintModels(const json& answer) {
  std::printf("%-28s %10s  %-12s  %-24s %s\n", "NAME", "SIZE", "SHA256", "HOLDERS", "INSTANCES");
  for (const json& m : answer.value("data", json::array())) {
    const std::string holders = Join(m.value("holders", json::array()), "name");
    const std::string used = Join(m.value("instances", json::array()));
    std::printf("%-28s %10s  %-12s  %-24s %s\n", m.value("name", "").c_str(), Mb(m.value("file_bytes", 0.0)).c_str(),
                m.value("sha256", "").substr(0, 12).c_str(), holders.c_str(), used.empty() ? "-" : used.c_str());
  }
  return 0;
}

int PrintInstances(const json& answer) {
  std::printf("%-20s %-20s %-9s %-12s %-30s %s\n", "ID", "MODEL", "STATE", "PLAN", "NODES", "MEMORY");
  for (const json& i : answer.value("data", json::array())) {
    const std::string nodes = Join(i.value("ranks", json::array()), "name");
    double bytes = 0;
    for (const json& r : i.value("ranks", json::array())) bytes += r.value("weight_bytes", 0.0) + r.value("kv_bytes", 0.0);
    std::string state = i.value("state", "");
    if (i.contains("error")) state += " (" + i["error"].get<std::string>() + ")";
    if (state == "unplaced" && !i.value("reason", "").empty()) state += " (" + i.value("reason", "") + ")";
    std::printf("%-20s %-20s %-9s %-12s %-30s %s\n", i.value("id", "").c_str(), i.value("model", "").c_str(),
                state.c_str(), i.value("plan", "").c_str(), nodes.c_str(), Mb(bytes).c_str());
  }
  return 0;
}

int Pull(const ManageOptions& o) {
  server::PullOptions p;
  p.source = o.source;
  p.dest_dir = o.models_dir;
  p.sha256 = o.sha256;
  p.name = o.name;
  if (!o.hub.empty()) p.hub = o.hub;
  p.quant = o.quant;
  ProgressPrinter printer("pull");
  if (server::IsBareRepo(p.source)) {
    // Said before the download starts: which of the repository's files this pulls.
    auto file = server::ChooseRepoFile(p.source, p.hub, p.quant, p.timeout_s);
    if (!file.ok()) return Fail("pull", file.status());
    printer.Say(p.source + ": pulling " + *file + (p.quant.empty() ? " (its only GGUF file)" : " (matches --quant " + p.quant + ")"));
    p.source += ":" + *file;
  }
  bool said_resumed = false;
  p.progress = [&](const server::PullProgress& progress) {
    if (progress.resumed && !said_resumed) printer.Say("resuming a partial download");
    said_resumed |= progress.resumed;
    ProgressFigures f;
    f.bytes_done = static_cast<uint64_t>(progress.bytes_done);
    f.bytes_total = progress.bytes_total < 0 ? 0 : static_cast<uint64_t>(progress.bytes_total);
    f.rate_bytes_per_s = progress.rate_Bps;
    if (f.bytes_total > 0 && f.rate_bytes_per_s > 0) {
      f.eta_s = static_cast<double>(f.bytes_total - std::min(f.bytes_done, f.bytes_total)) / f.rate_bytes_per_s;
    }
    printer.Show(f);
  };
  auto pulled = server::PullModel(p);
  printer.End();
  if (!pulled.ok()) return Fail("pull", pulled.status());
  std::printf("%s %s (%s, sha256 %s%s)\n", pulled->already ? "have" : "pulled", pulled->path.c_str(),
              Mb(static_cast<double>(pulled->bytes)).c_str(), pulled->sha256.c_str(),
              pulled->verified ? ", verified" : ", not verified: no digest was given or published");
  return 0;
}

// The progress object of an instance's answer as figures.
ProgressFigures FiguresOfJson(const json& p) {
  ProgressFigures f;
  f.bytes_done = p.value("bytes_done", uint64_t{0});
  f.bytes_total = p.value("bytes_total", uint64_t{0});
  f.rate_bytes_per_s = p.value("rate_bytes_per_s", 0.0);
  f.eta_s = p.contains("eta_s") && p["eta_s"].is_number() ? p["eta_s"].get<double>() : -1;
  return f;
}

// POST /v1/instances, then GET it every half second, drawing its progress, until it settles
// or --wait runs out; returns the last answer.
Result<json> Load(const server::ApiClient& api, const ManageOptions& o) {
  json body = {{"model", o.model}, {"layout", o.layout}, {"wait_s", 0}};
  if (o.nodes > 0) body["nodes"] = o.nodes;
  if (!o.id.empty()) body["id"] = o.id;
  COHORT_ASSIGN_OR_RETURN(json answer, api.Call("POST", "/v1/instances", body));
  const std::string id = answer.value("id", o.id);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.wait_s);
  ProgressPrinter printer("load");
  for (;;) {
    const std::string state = answer.value("state", "");
    if (state == "ready" || state == "failed" || state == "unplaced") break;
    if (answer.contains("progress") && answer["progress"].is_object()) {
      printer.Show(FiguresOfJson(answer["progress"]), answer["progress"].value("phase", ""));
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    COHORT_ASSIGN_OR_RETURN(answer, api.Call("GET", "/v1/instances/" + id));
  }
  printer.End();
  return answer;
}

}  // namespace

bool ManageCommands::Chosen() const {
  for (CLI::App* c : {models, ps, load, unload, rm, pull}) {
    if (c != nullptr && c->parsed()) return true;
  }
  return false;
}

ManageCommands AddManageCommands(CLI::App& app, ManageOptions* o) {
  ManageCommands c;
  c.models = app.add_subcommand("models", "list the model files a running cluster knows, and who holds them");
  AddApiOptions(c.models, o);
  c.ps = app.add_subcommand("ps", "list a running cluster's instances: state, plan, nodes, memory");
  AddApiOptions(c.ps, o);
  c.load = app.add_subcommand("load", "run an instance of a model on a running cluster");
  AddApiOptions(c.load, o);
  c.load->add_option("model", o->model, "model name, or a GGUF path on the node --api names")->required();
  c.load->add_option("--layout", o->layout, "auto, single, tp, pp, hybrid, tp:W,.., pp:W,.., hybrid:SxT");
  c.load->add_option("--nodes", o->nodes, "nodes to use (0: as the planner finds best)")->check(CLI::Range(0, 64));
  c.load->add_option("--id", o->id, "instance id (default: the model's name)");
  c.load->add_option("--wait", o->wait_s, "seconds to wait until it is ready")->check(CLI::Range(0, 600));
  c.unload = app.add_subcommand("unload", "stop an instance on a running cluster");
  AddApiOptions(c.unload, o);
  c.unload->add_option("id", o->id, "instance id (see `cohort ps`)")->required();
  c.rm = app.add_subcommand("rm", "remove a model from a running cluster: its files and cached shares on every node");
  AddApiOptions(c.rm, o);
  c.rm->add_option("model", o->model, "model name (see `cohort models`)")->required();
  c.pull = app.add_subcommand("pull", "download a model file (http(s) URL, or Hugging Face OWNER/REPO[:FILE])");
  c.pull->add_option("source", o->source, "URL, OWNER/REPO:FILE, or OWNER/REPO (its one GGUF, or --quant's)")->required();
  c.pull->add_option("--quant", o->quant, "OWNER/REPO: the GGUF whose name contains this, e.g. Q4_K_M");
  c.pull->add_option("--hub", o->hub, "Hugging Face or a mirror (default: https://huggingface.co)")->envname("HF_ENDPOINT");
  c.pull->add_option("--models-dir", o->models_dir, "where to put it (a node's: <state-dir>/models)")
      ->envname("COHORT_MODELS_DIR");
  c.pull->add_option("--sha256", o->sha256, "expected digest (default: the one Hugging Face publishes)");
  c.pull->add_option("--name", o->name, "file name (default: the URL's)");
  return c;
}

int ManageCommand(const ManageCommands& c, const ManageOptions& o) {
  if (c.pull->parsed()) return Pull(o);
  const server::ApiClient api(o.api);
  const char* command = c.models->parsed() ? "models" : c.ps->parsed() ? "ps" : c.load->parsed() ? "load"
                        : c.unload->parsed() ? "unload" : "rm";
  Result<json> answer = json();
  if (c.models->parsed()) answer = api.Call("GET", "/v1/model-files");
  if (c.ps->parsed()) answer = api.Call("GET", "/v1/instances");
  if (c.unload->parsed()) answer = api.Call("DELETE", "/v1/instances/" + o.id);
  if (c.rm->parsed()) answer = api.Call("DELETE", "/v1/model-files/" + o.model);
  if (c.load->parsed()) answer = Load(api, o);
  if (!answer.ok()) return Fail(command, answer.status());
  if (o.json) {
    std::printf("%s\n", answer->dump(2).c_str());
  } else if (c.models->parsed()) {
    PrintModels(*answer);
  } else if (c.ps->parsed()) {
    PrintInstances(*answer);
  } else if (c.load->parsed()) {
    PrintInstances({{"data", json::array({*answer})}});
  } else {
    std::printf("%s %s\n", c.unload->parsed() ? "unloaded" : "removed", c.unload->parsed() ? o.id.c_str() : o.model.c_str());
  }
  // A load that settled anywhere but "ready" did not do what was asked.
  if (c.load->parsed() && answer->value("state", "") != "ready") return Fail("load", Unavailable("instance is " + answer->value("state", std::string("?"))));
  return 0;
}

}  // namespace cohort::app
