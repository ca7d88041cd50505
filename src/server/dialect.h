// Dialect: how one client API writes a generation's answer — OpenAI's chat and completions,
// Anthropic's Messages, Ollama's chat and generate, OpenAI's Responses. Every API runs on the
// one generation path of HttpServer (route, relay, tokenize, schedule, collect or stream);
// an API's routes only translate its request into an OpenAI body (DialectCall) and give a
// Dialect that renders the engine's output in its own shapes. One Dialect serves one request,
// so a streaming one may keep state (the text so far, which events it has sent).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/scheduler.h"
#include "server/api_request.h"
#include "server/api_response.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Response;
}  // namespace httplib

namespace cohort::server {

class Dialect {
 public:
  virtual ~Dialect() = default;
  // The body of an error answer in this API's shape (its status is error.http_status).
  virtual std::string ErrorBody(const ApiError& error) const = 0;
  // "chatcmpl-", "msg_", "resp_", ...: the prefix of the ids this API's answers carry.
  virtual const char* IdPrefix() const = 0;
  // Called once the request is parsed, before it runs: what the answer echoes (the stop
  // strings, stream_options).
  virtual void Prepare(const ApiRequest& request) { (void)request; }
  // The content type of a streamed answer.
  virtual const char* StreamType() const { return "text/event-stream"; }
  // The whole answer of a finished generation.
  virtual std::string Whole(const ResponseMeta& meta, const engine::RequestOutput& total,
                            const tokenizer::Tokenizer& tok) = 0;
  // The whole answer of a request for several choices (OpenAI's n); only OpenAI's bodies
  // carry n, so only its dialect overrides this.
  virtual std::string WholeChoices(const ResponseMeta& meta, const std::vector<engine::RequestOutput>& totals,
                                   const tokenizer::Tokenizer& tok) {
    return Whole(meta, totals.front(), tok);
  }
  // A streamed answer: what comes before the first piece (the prompt's length is known),
  // each piece of new output (never done), the end of a generation that succeeded (`last`
  // holds the finish reason and the counts), and the end of one that failed. With several
  // choices (OpenAI's n, the only API whose bodies carry it) the first three are called for
  // each choice with meta.choice set, choices interleaved; the dialect closes the stream after
  // the last choice's StreamEnd. A failed choice ends the whole stream with StreamError.
  virtual std::string StreamStart(const ResponseMeta& meta, int32_t prompt_tokens,
                                  const tokenizer::Tokenizer& tok) = 0;
  virtual std::string StreamPiece(const ResponseMeta& meta, const engine::RequestOutput& piece,
                                  const tokenizer::Tokenizer& tok) = 0;
  virtual std::string StreamEnd(const ResponseMeta& meta, const engine::RequestOutput& last,
                                const tokenizer::Tokenizer& tok) = 0;
  virtual std::string StreamError(const ApiError& error) = 0;
  // The answer of a token count (count_only): the prompt's length in tokens.
  virtual std::string CountBody(int32_t prompt_tokens) const;
};

// What a route of another API hands the generation path: its request as OpenAI's endpoint
// `endpoint` takes it, parsed there with the instance's limits.
struct DialectCall {
  Endpoint endpoint = Endpoint::kChat;
  std::string openai_body;  // a /v1/chat/completions or /v1/completions body
  std::string model;        // routes the request ("": the default instance)
  // Fields the OpenAI body cannot carry (top_k, Ollama's options), applied after the parse.
  std::function<Status(ApiRequest&)> refine;
  std::shared_ptr<Dialect> dialect;
  bool count_only = false;  // answer dialect->CountBody(prompt tokens) instead of generating
  // The dialect writes parsed tool calls (OpenAI's: ResponseMeta::parse_tools), so tools get
  // their format and tool_choice its forcing grammar (HttpServer::PrepareTools).
  bool writes_tool_calls = false;
  // The OpenAI parse's field names that this API calls otherwise ("max_tokens" ->
  // "max_output_tokens"), so its errors name the field the client sent.
  std::vector<std::pair<std::string, std::string>> field_names;
};

// `status` with its "field: why" message naming the field as `field_names` map it.
Status RenameField(const Status& status, const std::vector<std::pair<std::string, std::string>>& field_names);

// Writes `status` as an error answer in `dialect`'s shape (HttpErrorOf's status).
void SendDialectError(httplib::Response& res, const Dialect& dialect, const Status& status);

// OpenAI's own shapes (api_response.h): chat.completion and its chunks, or text_completion.
std::shared_ptr<Dialect> MakeOpenAiDialect(Endpoint endpoint);

}  // namespace cohort::server
