// LoadedModel: everything one GGUF file provides to the engine — the mapped file, its
// tokenizer, the model (weights are views into the mapping) and its chat template — owned
// together so that the file outlives every view into it.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/grammar_matcher.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {

struct LoadOptions {
  gguf::ReadLimits limits;
  // A `tokenizer.chat_template` that does not parse fails Open() when set; otherwise the
  // model loads without a template (completions still work) and chat_template_status() says
  // why.
  bool require_chat_template = false;
  // The model runs whole in this process: its weight matrices take the matmul kernels'
  // packed layout (Model::PackWeights).
  bool pack_weights = true;
  // Builds the model over the opened file instead of model::Model::Load (a model spread over
  // ranks, parallel::DistributedModel, which loads and packs its own share); the file
  // outlives the model it returns. Unset: the whole model in this process.
  std::function<Result<std::unique_ptr<model::Model>>(const gguf::File& file)> make_model;
  Status Validate() const { return Status::Ok(); }
};

class LoadedModel {
 public:
  // Maps the file, then builds the tokenizer, the model and the chat template from it.
  static Result<std::unique_ptr<LoadedModel>> Open(const std::string& path,
                                                   const LoadOptions& options = {});
  // Assembles a bundle from parts already built (tests, or a caller with its own loader).
  // `file` may be null when the parts do not reference one.
  static std::unique_ptr<LoadedModel> FromParts(
      std::unique_ptr<gguf::File> file, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
      std::unique_ptr<model::Model> model,
      std::unique_ptr<tokenizer::ChatTemplate> chat_template = nullptr);

  const gguf::File* file() const { return file_.get(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tokenizer_; }
  model::Model& model() { return *model_; }
  const model::Model& model() const { return *model_; }
  const model::ModelConfig& config() const { return model_->config(); }
  // Null when the file carries no template or it did not parse.
  const tokenizer::ChatTemplate* chat_template() const { return chat_template_.get(); }
  const Status& chat_template_status() const { return chat_template_status_; }
  // False for a model built by LoadOptions::make_model (spread over ranks): this process holds
  // one slice of the KV rows (a prefix cache needs the model's model::KvBlockReplicas).
  bool in_process() const { return in_process_; }
  // The vocabulary's byte strings and trie for grammar-constrained sampling, built on first
  // use (a 128K vocabulary takes tens of milliseconds) and then shared. Thread-safe.
  std::shared_ptr<const TokenVocab> grammar_vocab() const;

  // Renders messages with `override_template`, or else the model's chat template (kNotFound
  // when there is none), passing the vocabulary's BOS/EOS texts as bos_token/eos_token. As in
  // llama.cpp, a leading BOS (trailing EOS) text is removed when the tokenizer adds that token
  // itself, so the prompt does not start with two BOS tokens.
  Result<std::string> RenderChat(const std::vector<tokenizer::ChatMessage>& messages,
                                 bool add_generation_prompt = true,
                                 const tokenizer::ChatTemplate* override_template = nullptr,
                                 const std::string& tools_json = "") const;

 private:
  LoadedModel() = default;
  static Result<std::unique_ptr<LoadedModel>> FinishOpen(std::unique_ptr<LoadedModel> loaded, const std::string& path,
                                                         const LoadOptions& options);

  // Declared first so it is destroyed last: the model's weights point into its mapping.
  std::unique_ptr<gguf::File> file_;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::ChatTemplate> chat_template_;
  Status chat_template_status_;
  bool in_process_ = true;
  mutable std::once_flag grammar_vocab_once_;
  mutable std::shared_ptr<const TokenVocab> grammar_vocab_;
};

}  // namespace cohort::engine
