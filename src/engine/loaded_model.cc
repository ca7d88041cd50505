// Opening a GGUF into a LoadedModel: file, tokenizer, model, chat template, in that order,
// each failure annotated with the path.
#include "engine/loaded_model.h"

#include <utility>

namespace cohort::engine {

Result<std::unique_ptr<LoadedModel>> LoadedModel::Open(const std::string& path,
                                                       const LoadOptions& options) {
  COHORT_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<LoadedModel> loaded(new LoadedModel());
  auto file = gguf::File::Open(path, options.limits);
  if (!file.ok()) return file.status().Annotate(path);
  loaded->file_ = std::move(file).value();

  auto tok = tokenizer::Tokenizer::FromGguf(*loaded->file_);
  if (!tok.ok()) return tok.status().Annotate(path + ": tokenizer");
  loaded->tokenizer_ = std::move(tok).value();

  if (options.make_model) {
    auto made = options.make_model(*loaded->file_);
    if (!made.ok()) return made.status();  // says itself which rank or worker failed
    loaded->model_ = std::move(made).value();
    loaded->in_process_ = false;
    return FinishOpen(std::move(loaded), path, options);
  }
  auto model = model::Model::Load(*loaded->file_);
  if (!model.ok()) return model.status().Annotate(path + ": model");
  loaded->model_ = std::move(model).value();
  if (options.pack_weights) {
    auto packed = loaded->model_->PackWeights();
    if (!packed.ok()) return packed.status().Annotate(path + ": packing the weights");
  }
  return FinishOpen(std::move(loaded), path, options);
}

// The checks and the chat template that follow the model, however it was built.
Result<std::unique_ptr<LoadedModel>> LoadedModel::FinishOpen(std::unique_ptr<LoadedModel> loaded,
                                                             const std::string& path, const LoadOptions& options) {

  if (loaded->tokenizer_->n_vocab() != loaded->model_->config().n_vocab) {
    return Corrupt(path + ": the tokenizer has " + std::to_string(loaded->tokenizer_->n_vocab()) +
                   " tokens but the model's output has " +
                   std::to_string(loaded->model_->config().n_vocab));
  }

  if (loaded->file_->Find("tokenizer.chat_template") == nullptr) {
    loaded->chat_template_status_ = NotFound("the file has no tokenizer.chat_template");
    if (options.require_chat_template) return loaded->chat_template_status_.Annotate(path);
    return loaded;
  }
  auto source = loaded->file_->GetString("tokenizer.chat_template");
  if (!source.ok()) return source.status().Annotate(path);
  auto parsed = tokenizer::ChatTemplate::Parse(*source);
  if (parsed.ok()) {
    loaded->chat_template_ = std::make_unique<tokenizer::ChatTemplate>(std::move(parsed).value());
  } else {
    loaded->chat_template_status_ = parsed.status().Annotate("tokenizer.chat_template");
    if (options.require_chat_template) return loaded->chat_template_status_.Annotate(path);
  }
  return loaded;
}

std::unique_ptr<LoadedModel> LoadedModel::FromParts(
    std::unique_ptr<gguf::File> file, std::unique_ptr<tokenizer::Tokenizer> tokenizer,
    std::unique_ptr<model::Model> model, std::unique_ptr<tokenizer::ChatTemplate> chat_template) {
  COHORT_CHECK(tokenizer != nullptr);
  COHORT_CHECK(model != nullptr);
  COHORT_CHECK_EQ(tokenizer->n_vocab(), model->config().n_vocab);
  std::unique_ptr<LoadedModel> loaded(new LoadedModel());
  loaded->file_ = std::move(file);
  loaded->tokenizer_ = std::move(tokenizer);
  loaded->model_ = std::move(model);
  loaded->chat_template_ = std::move(chat_template);
  if (loaded->chat_template_ == nullptr) {
    loaded->chat_template_status_ = NotFound("no chat template was given");
  }
  return loaded;
}

Result<std::string> LoadedModel::RenderChat(const std::vector<tokenizer::ChatMessage>& messages,
                                            bool add_generation_prompt,
                                            const tokenizer::ChatTemplate* override_template,
                                            const std::string& tools_json) const {
  const tokenizer::ChatTemplate* chat = override_template ? override_template : chat_template_.get();
  if (chat == nullptr) {
    return chat_template_status_.ok() ? NotFound("the model has no chat template")
                                      : chat_template_status_;
  }
  tokenizer::ChatTemplateInputs inputs;
  inputs.messages = messages;
  inputs.add_generation_prompt = add_generation_prompt;
  inputs.tools_json = tools_json;
  const int32_t bos = tokenizer_->bos();
  const int32_t eos = tokenizer_->eos();
  if (bos >= 0) inputs.bos_token = tokenizer_->text(bos);
  if (eos >= 0) inputs.eos_token = tokenizer_->text(eos);
  COHORT_ASSIGN_OR_RETURN(std::string text, chat->Apply(inputs));
  const std::string& b = inputs.bos_token;
  if (tokenizer_->add_bos() && !b.empty() && text.compare(0, b.size(), b) == 0) text.erase(0, b.size());
  const std::string& e = inputs.eos_token;
  if (tokenizer_->add_eos() && !e.empty() && text.size() >= e.size() &&
      text.compare(text.size() - e.size(), e.size(), e) == 0) {
    text.erase(text.size() - e.size());
  }
  return text;
}

std::shared_ptr<const TokenVocab> LoadedModel::grammar_vocab() const {
  // Control tokens a grammar may spell: the tool-call markers of the families whose calls
  // the server forces (server/tool_calls.cc). Other control tokens never match a grammar.
  static const std::vector<std::string> kMarkers = {
      "<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
      "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>",
      "<｜tool▁calls▁end｜>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
      "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>",
      "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "<|channel|>", "<|constrain|>",
      "<|message|>", "<|start|>", "<|end|>"};
  std::call_once(grammar_vocab_once_, [this] { grammar_vocab_ = std::make_shared<const TokenVocab>(*tokenizer_, kMarkers); });
  return grammar_vocab_;
}

}  // namespace cohort::engine
