// TOML configuration for CLI11 through toml11; see config_file.h.
#include "config_file.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

#include <CLI/CLI.hpp>
#include <toml.hpp>

namespace cohort::app {
namespace {

// "api-key" -> "COHORT_API_KEY".
std::string EnvNameOf(const std::string& flag) {
  std::string env = "COHORT_";
  for (char c : flag) env += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return env;
}

std::string ScalarText(const toml::value& v, const std::string& key) {
  if (v.is_boolean()) return v.as_boolean() ? "true" : "false";
  if (v.is_integer()) return std::to_string(v.as_integer());
  if (v.is_floating()) {
    std::ostringstream s;
    s << v.as_floating();
    return s.str();
  }
  if (v.is_string()) return v.as_string().str;
  throw CLI::ConversionError("--config: '" + key + "' must be a string, number, boolean or a list of them");
}

// CLI11 reads configuration files on the main app only, so the file's keys are handed to it
// as the running command's ("serve.port", "worker.listen"), but for the options of the main
// app itself (-t, -v).
class TomlConfig : public CLI::Config {
 public:
  TomlConfig(const CLI::App* app, std::vector<const CLI::App*> commands) : app_(app), commands_(std::move(commands)) {}

  std::string to_config(const CLI::App*, bool, bool, std::string) const override { return ""; }

  std::vector<CLI::ConfigItem> from_config(std::istream& in) const override {
    toml::value doc;
    try {
      doc = toml::parse(in, "--config");
    } catch (const std::exception& e) {
      throw CLI::ConversionError(std::string("--config: not TOML: ") + e.what());
    }
    // Parsed before the file is read: the command on the command line.
    const CLI::App* command = nullptr;
    for (const CLI::App* c : commands_) {
      if (c->parsed()) command = c;
    }
    if (command == nullptr) throw CLI::ConversionError("--config: only for serve, worker and node");
    std::vector<CLI::ConfigItem> items;
    for (const auto& [key, value] : doc.as_table()) {
      if (value.is_table()) {
        throw CLI::ConversionError("--config: [" + key + "]: no sections; every key is one of " + command->get_name() +
                                   "'s flags");
      }
      // The environment variable of a key outranks the file: leave the key to it.
      if (std::getenv(EnvNameOf(key).c_str()) != nullptr) continue;
      CLI::ConfigItem item;
      item.name = key;
      if (app_->get_option_no_throw("--" + key) == nullptr) item.parents = {command->get_name()};
      if (value.is_array()) {
        for (const toml::value& element : value.as_array()) item.inputs.push_back(ScalarText(element, key));
      } else {
        item.inputs.push_back(ScalarText(value, key));
      }
      items.push_back(std::move(item));
    }
    return items;
  }

 private:
  const CLI::App* app_;
  std::vector<const CLI::App*> commands_;
};

}  // namespace

void AddConfigFile(CLI::App* app, const std::vector<CLI::App*>& commands) {
  std::vector<CLI::App*> all = {app};
  all.insert(all.end(), commands.begin(), commands.end());
  for (CLI::App* cmd : all) {
    for (CLI::Option* option : cmd->get_options()) {
      const std::string name = option->get_single_name();
      if (name.empty() || name == "help" || name == "version" || !option->get_envname().empty()) continue;
      option->envname(EnvNameOf(name));
    }
    cmd->allow_config_extras(false);  // a mistyped key is an error, not ignored
  }
  // On the main app, where CLI11 reads it; `serve --config FILE` reaches it by fall-through.
  app->set_config("--config", "", "serve, worker, node: TOML file of flag = value (flags and COHORT_* variables override it)");
  app->config_formatter(std::make_shared<TomlConfig>(app, std::vector<const CLI::App*>(commands.begin(), commands.end())));
}

}  // namespace cohort::app
