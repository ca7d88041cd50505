// ServingInstance; see serving.h.
#include "engine/serving.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace cohort::engine {

int DefaultContext(const model::ModelConfig& config) {
  const int train = config.n_ctx_train;
  return std::min(train > 0 ? train : kDefaultMaxContext, kDefaultMaxContext);
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

Status ServingOptions::Validate() const {
  if (name.empty()) return InvalidArgument("a served model needs a name");
  if (threads <= 0) return InvalidArgument("compute threads must be positive");
  return Status::Ok();
}

Result<std::unique_ptr<ServingInstance>> ServingInstance::Open(std::unique_ptr<LoadedModel> model,
                                                               const ServingOptions& options, Logger& log) {
  COHORT_CHECK(model != nullptr);
  COHORT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<ServingInstance> s(new ServingInstance());
  s->name_ = options.name;
  if (!options.chat_template.empty()) {
    COHORT_ASSIGN_OR_RETURN(tokenizer::ChatTemplate parsed, LoadChatTemplate(options.chat_template));
    s->override_template_ = std::make_unique<tokenizer::ChatTemplate>(std::move(parsed));
  }
  s->model_ = std::move(model);
  s->pool_ = std::make_unique<ThreadPool>(options.threads);
  s->scheduler_options_ = options.scheduler;
  if (s->scheduler_options_.n_ctx <= 0) s->scheduler_options_.n_ctx = DefaultContext(s->model_->config());
  s->scheduler_ = std::make_unique<Scheduler>(*s->model_, Context{s->pool_.get(), &log}, s->scheduler_options_);
  COHORT_RETURN_IF_ERROR(s->scheduler_->Start());
  return s;
}

ServingInstance::~ServingInstance() {
  if (scheduler_ != nullptr) scheduler_->Stop();
  scheduler_.reset();
}

const tokenizer::ChatTemplate* ServingInstance::chat_template() const {
  return override_template_ != nullptr ? override_template_.get() : model_->chat_template();
}

}  // namespace cohort::engine
