// Small pieces several `cohort` subcommands share (see app_common.h).
#include "app_common.h"

#include <fstream>
#include <sstream>

namespace cohort::app {

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

Result<std::string> ReadSecret(const std::string& secret, const std::string& secret_file) {
  if (!secret.empty() && !secret_file.empty()) return InvalidArgument("give --secret or --secret-file, not both");
  if (secret_file.empty()) return secret;
  std::ifstream in(secret_file);
  if (!in) return IoError("cannot read " + secret_file);
  std::string line;
  std::getline(in, line);  // the first line; a trailing newline is not part of it
  return line;
}

Result<tokenizer::ChatTemplate> LoadChatTemplate(const std::string& name_or_file) {
  auto builtin = tokenizer::ChatTemplate::Builtin(name_or_file);
  if (builtin.ok()) return builtin;
  std::ifstream in(name_or_file, std::ios::binary);
  if (!in) {
    std::string names;
    for (const std::string& n : tokenizer::ChatTemplate::BuiltinNames()) {
      names += " ";
      names += n;
    }
    return NotFound("--chat-template '" + name_or_file + "' is neither a built-in template (" + names.substr(1) +
                    ") nor a readable file");
  }
  std::stringstream source;
  source << in.rdbuf();
  return tokenizer::ChatTemplate::Parse(source.str());
}

}  // namespace cohort::app
