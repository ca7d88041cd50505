// OpenAI's chat and text completions as a Dialect: the shapes of api_response.h, streamed as
// "data: {chunk}" events ending in "data: [DONE]".
#include <nlohmann/json.hpp>

#include "server/dialect.h"

namespace cohort::server {

namespace {

class OpenAiDialect final : public Dialect {
 public:
  explicit OpenAiDialect(Endpoint endpoint) : endpoint_(endpoint) {}

  std::string ErrorBody(const ApiError& error) const override { return ErrorJson(error); }
  const char* IdPrefix() const override { return endpoint_ == Endpoint::kChat ? "chatcmpl-" : "cmpl-"; }
  void Prepare(const ApiRequest& request) override { include_usage_ = request.include_usage; }

  std::string Whole(const ResponseMeta& meta, const engine::RequestOutput& total,
                    const tokenizer::Tokenizer& tok) override {
    return CompletionJson(meta, total, tok);
  }

  // One completion per choice, its choice renumbered; the usage counts the prompt once and
  // every choice's tokens, as OpenAI's does.
  std::string WholeChoices(const ResponseMeta& meta, const std::vector<engine::RequestOutput>& totals,
                           const tokenizer::Tokenizer& tok) override {
    nlohmann::json body = nlohmann::json::parse(CompletionJson(meta, totals.front(), tok));
    int32_t completion_tokens = 0;
    for (size_t i = 0; i < totals.size(); ++i) {
      completion_tokens += totals[i].completion_tokens;
      if (i == 0) continue;
      nlohmann::json choice = nlohmann::json::parse(CompletionJson(meta, totals[i], tok))["choices"][0];
      choice["index"] = i;
      body["choices"].push_back(std::move(choice));
    }
    body["usage"]["completion_tokens"] = completion_tokens;
    body["usage"]["total_tokens"] = totals.front().prompt_tokens + completion_tokens;
    return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }

  std::string StreamStart(const ResponseMeta& meta, int32_t, const tokenizer::Tokenizer& tok) override {
    // The chat stream's first chunk carries the assistant's role; completions have none.
    if (endpoint_ != Endpoint::kChat) return "";
    return ChunkEvent(meta, engine::RequestOutput{}, tok, true);
  }

  std::string StreamPiece(const ResponseMeta& meta, const engine::RequestOutput& piece,
                          const tokenizer::Tokenizer& tok) override {
    if (meta.parse_tools) {  // a call is known only whole: the text waits, and goes out parsed at the end
      tool_text_.Append(engine::RequestOutput(piece));
      return "";
    }
    // A relaying node asked for the token ids (resuming_relay.h): a chunk for every token.
    if (piece.text.empty() && piece.logprobs.empty() && !(meta.token_ids && !piece.tokens.empty())) return "";
    return ChunkEvent(meta, piece, tok, false);
  }

  std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last,
                        const tokenizer::Tokenizer& tok) override {
    if (meta.parse_tools) {
      engine::RequestOutput end = last;  // its text already came as the last piece
      end.text.clear();
      end.tokens.clear();
      end.logprobs.clear();
      tool_text_.Append(std::move(end));
      std::string events = ToolChunkEvents(meta, tool_text_);
      if (include_usage_) {
        events += UsageEvent(meta, tool_text_.prompt_tokens, tool_text_.completion_tokens, tool_text_.cached_tokens);
      }
      return events + "data: [DONE]\n\n";
    }
    engine::RequestOutput finish;
    finish.done = true;
    finish.finish_reason = last.finish_reason;
    std::string events = ChunkEvent(meta, finish, tok, false);
    if (include_usage_) events += UsageEvent(meta, last.prompt_tokens, last.completion_tokens, last.cached_tokens);
    return events + "data: [DONE]\n\n";
  }

  std::string StreamError(const ApiError& error) override { return ErrorEvent(error) + "data: [DONE]\n\n"; }

 private:
  Endpoint endpoint_;
  bool include_usage_ = false;
  engine::RequestOutput tool_text_;  // a chat with tools: everything so far
};

}  // namespace

std::shared_ptr<Dialect> MakeOpenAiDialect(Endpoint endpoint) {
  return std::make_shared<OpenAiDialect>(endpoint);
}

}  // namespace cohort::server
