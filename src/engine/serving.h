// ServingInstance: one model being served — the loaded model, its compute threads, its
// scheduler (continuous batching) and the chat template requests are rendered with — under
// the name API requests use. `cohort serve`, and the cluster's coordinator for each instance
// it hosts, build it with ServingInstance::Open; the HTTP front serves any number of them.
#pragma once

#include <memory>
#include <string>

#include "core/log.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/scheduler.h"
#include "tokenizer/chat_template.h"

namespace cohort::engine {

// The context a slot gets when none is asked for: the model's training context, at most this.
inline constexpr int kDefaultMaxContext = 4096;
int DefaultContext(const model::ModelConfig& config);

// The template --chat-template names: a built-in family name or a Jinja file.
Result<tokenizer::ChatTemplate> LoadChatTemplate(const std::string& name_or_file);

struct ServingOptions {
  std::string name = "cohort";    // the model id of API requests and /v1/models
  int threads = 1;                // compute threads
  SchedulerOptions scheduler;     // n_ctx 0: DefaultContext(the model's config)
  std::string chat_template;      // built-in name or Jinja file; empty: the model's own
  Status Validate() const;
};

class ServingInstance {
 public:
  // Starts the scheduler over `model`; `log` outlives the instance.
  static Result<std::unique_ptr<ServingInstance>> Open(std::unique_ptr<LoadedModel> model,
                                                       const ServingOptions& options, Logger& log);
  ~ServingInstance();  // stops the scheduler: requests still running end
  ServingInstance(const ServingInstance&) = delete;
  ServingInstance& operator=(const ServingInstance&) = delete;

  const std::string& name() const { return name_; }
  LoadedModel& model() { return *model_; }
  Scheduler& scheduler() { return *scheduler_; }
  const SchedulerOptions& scheduler_options() const { return scheduler_options_; }
  // The --chat-template override, else the model's (null: the model has none).
  const tokenizer::ChatTemplate* chat_template() const;
  // Ok while the model runs; the forward failure that broke it otherwise.
  Status failure() const { return scheduler_->failure(); }

 private:
  ServingInstance() = default;

  std::string name_;
  std::unique_ptr<LoadedModel> model_;  // declared first: outlives the scheduler over it
  std::unique_ptr<tokenizer::ChatTemplate> override_template_;
  std::unique_ptr<ThreadPool> pool_;
  SchedulerOptions scheduler_options_;
  std::unique_ptr<Scheduler> scheduler_;
};

}  // namespace cohort::engine
