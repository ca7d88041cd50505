// The subcommands of the `cohort` binary. Each parses nothing itself: main.cc fills the
// options from the command line and calls one of these, which returns the process exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cmd_worker.h"

namespace cohort::app {

struct CommonOptions {
  int threads = 0;  // 0: all hardware threads
  bool verbose = false;
};

struct RunOptions {
  std::string model;
  std::string prompt;
  int n_predict = 128;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint64_t seed = 0;
  bool seed_set = false;
  bool chat = false;
  std::string chat_template;     // name or file overriding the GGUF's template
  std::string system_prompt;
  int n_ctx = 0;
  std::string kv_type = "f32";
  std::vector<std::string> stop;
  DistOptions dist;  // spread the model over workers (cmd_worker.h)
};

struct LogitsOptions {
  std::string model;
  std::string tokens;  // "1,10,20"
  std::string output;
  int n_batch = 0;     // 0: all tokens in one batch
  int prompt_batch = 0;  // > 0: the first prompt_batch tokens in one batch, then one at a time
  std::string kv_type = "f32";
  DistOptions dist;  // spread the model over workers (cmd_worker.h)
};

struct TokenizeOptions {
  std::string model;
  bool no_special = false;
  bool detokenize = false;
};

int RunCommand(const CommonOptions& common, const RunOptions& options);
int LogitsCommand(const CommonOptions& common, const LogitsOptions& options);
int TokenizeCommand(const CommonOptions& common, const TokenizeOptions& options);
int InspectCommand(const CommonOptions& common, const std::string& model, int n_ctx);

// The demo model shipped with the repository (models/stories260K.gguf), found relative to
// the executable or the source tree; "" when it cannot be found.
std::string DefaultModelPath();
int DefaultThreads();

}  // namespace cohort::app
