// `cohort models`, `ps`, `load`, `unload`, `rm` (a running cluster's models and instances,
// through a node's HTTP API) and `cohort pull` (a model file into a models directory).
#pragma once

#include <string>
#include <vector>

#include "server/api_client.h"

namespace CLI {
class App;
}

namespace cohort::app {

struct ManageOptions {
  server::ApiClientOptions api;
  std::string model;          // load, rm: a model name or a GGUF path on the node
  std::string id;             // load: the instance id (default: the model's name); unload
  std::string layout = "tp";  // load
  int nodes = 0;              // load (0: as the planner finds best)
  int wait_s = 300;           // load: how long to wait for the instance to be ready
  bool json = false;          // print the API's JSON instead of a table
  // pull
  std::string source;
  std::string models_dir = "models";
  std::string sha256;
  std::string name;
  std::string hub;    // "": server::kDefaultHub
  std::string quant;  // owner/repo: which GGUF
};

// The CLI's subcommands of this file, each registered on `app`; `Which` says which ran.
struct ManageCommands {
  CLI::App* models = nullptr;
  CLI::App* ps = nullptr;
  CLI::App* load = nullptr;
  CLI::App* unload = nullptr;
  CLI::App* rm = nullptr;
  CLI::App* pull = nullptr;
  bool Chosen() const;
};
ManageCommands AddManageCommands(CLI::App& app, ManageOptions* options);
int ManageCommand(const ManageCommands& commands, const ManageOptions& options);

}  // namespace cohort::app
