// OpenAI's chat and text completions as a Dialect: the shapes of api_response.h, streamed as
// "data: {chunk}" events ending in "data: [DONE]"; with n choices the chunks of all choices
// interleave, each carrying its choice's index, and [DONE] follows the last choice's end.
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "server/dialect.h"

namespace cohort::server {

namespace {

class OpenAiDialect final : public Dialect {
 public:
  explicit OpenAiDialect(Endpoint endpoint) : endpoint_(endpoint) {}

  std::string ErrorBody(const ApiError& error) const override { return ErrorJson(error); }
  const char* IdPrefix() const override { return endpoint_ == Endpoint::kChat ? "chatcmpl-" : "cmpl-"; }
  void Prepare(const ApiRequest& request) override {
    include_usage_ = request.include_usage;
    tool_text_.assign(static_cast<size_t>(request.n), engine::RequestOutput{});
    tool_stream_.assign(static_cast<size_t>(request.n), std::nullopt);
  }

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
    if (meta.parse_tools) {  // what is final goes out now; a call is known only whole, at the end
      ToolText(meta).Append(engine::RequestOutput(piece));
      const ToolTextStream::Delta d = ToolStream(meta).Append(piece.text);
      if (d.empty() && !(meta.token_ids && !piece.tokens.empty())) return "";
      return ToolDeltaEvent(meta, d, piece.tokens);
    }
    // A relaying node asked for the token ids (resuming_relay.h): a chunk for every token.
    if (piece.text.empty() && piece.logprobs.empty() && !(meta.token_ids && !piece.tokens.empty())) return "";
    return ChunkEvent(meta, piece, tok, false);
  }

  // Ends choice meta.choice with its finish_reason; after the last choice's end, the usage
  // (the prompt once, every choice's tokens) and [DONE] close the stream.
  std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last,
                        const tokenizer::Tokenizer& tok) override {
    std::string events;
    if (meta.parse_tools) {
      engine::RequestOutput end = last;  // its text already came as the last piece
      end.text.clear();
      end.tokens.clear();
      end.logprobs.clear();
      engine::RequestOutput& text = ToolText(meta);
      text.Append(std::move(end));
      const ToolTextStream::Delta unsent =
          ToolStream(meta).Finish(ParseToolOutput(meta, text.text));
      events = ToolChunkEvents(meta, text, unsent);
    } else {
      engine::RequestOutput finish;
      finish.done = true;
      finish.finish_reason = last.finish_reason;
      events = ChunkEvent(meta, finish, tok, false);
    }
    if (choices_ended_ == 0) {
      usage_prompt_tokens_ = last.prompt_tokens;
      usage_cached_tokens_ = last.cached_tokens;
    }
    usage_completion_tokens_ += last.completion_tokens;
    choices_ended_ += 1;
    COHORT_CHECK(choices_ended_ <= tool_text_.size());
    if (choices_ended_ < tool_text_.size()) return events;
    if (include_usage_) events += UsageEvent(meta, usage_prompt_tokens_, usage_completion_tokens_, usage_cached_tokens_);
    return events + "data: [DONE]\n\n";
  }

  std::string StreamError(const ApiError& error) override { return ErrorEvent(error) + "data: [DONE]\n\n"; }

 private:
  // Made on first use: the format is known once the request is prepared, after Prepare.
  ToolTextStream& ToolStream(const ResponseMeta& meta) {
    std::optional<ToolTextStream>& stream = tool_stream_.at(static_cast<size_t>(meta.choice));
    if (!stream) stream.emplace(meta.tool_format, meta.opens_think);
    return *stream;
  }
  engine::RequestOutput& ToolText(const ResponseMeta& meta) {
    COHORT_CHECK(meta.choice >= 0 && static_cast<size_t>(meta.choice) < tool_text_.size());
    return tool_text_[static_cast<size_t>(meta.choice)];
  }

  Endpoint endpoint_;
  bool include_usage_ = false;
  // One per choice (request.n): a chat with tools keeps everything so far.
  std::vector<engine::RequestOutput> tool_text_;
  std::vector<std::optional<ToolTextStream>> tool_stream_;  // and what of it went out
  // The streamed choices that have ended, and the usage over them.
  size_t choices_ended_ = 0;
  int32_t usage_prompt_tokens_ = 0;
  int32_t usage_cached_tokens_ = 0;
  int32_t usage_completion_tokens_ = 0;
};

}  // namespace

std::shared_ptr<Dialect> MakeOpenAiDialect(Endpoint endpoint) {
  return std::make_shared<OpenAiDialect>(endpoint);
}

}  // namespace cohort::server
