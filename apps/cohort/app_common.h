// Small pieces several `cohort` subcommands share: option parsing helpers, the chat template
// named by --chat-template, and a model lent to an owner that wants a unique_ptr.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"

namespace cohort::app {

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated option, empty items dropped.
std::vector<std::string> SplitCommaList(const std::string& text);

// The cluster secret from --secret or the first line of --secret-file (not both).
Result<std::string> ReadSecret(const std::string& secret, const std::string& secret_file);

// The template --chat-template names: a built-in family name or a Jinja file.
Result<tokenizer::ChatTemplate> LoadChatTemplate(const std::string& name_or_file);

// Lends a model to an owner that wants a unique_ptr (engine::LoadedModel); the lent model
// must outlive it.
class BorrowedModel final : public model::Model {
 public:
  explicit BorrowedModel(model::Model& m) : m_(m) {}
  const model::ModelConfig& config() const override { return m_.config(); }
  Result<std::unique_ptr<model::KvCache>> NewKvCache(const model::KvCacheOptions& o) const override {
    return m_.NewKvCache(o);
  }
  Status Forward(const Context& ctx, const model::Batch& batch, model::KvCache& cache,
                 std::span<float> logits) override {
    return m_.Forward(ctx, batch, cache, logits);
  }

 private:
  model::Model& m_;
};

}  // namespace cohort::app
