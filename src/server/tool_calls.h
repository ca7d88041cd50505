// Tool calls in each model family's own format: which format a chat template speaks, the
// grammar that forces a well-formed call (tool_choice required or a named function) with
// schema-valid arguments, and the parse of a finished completion into content, reasoning
// (<think>, harmony's analysis channel) and OpenAI tool calls. The formats follow the
// families' templates in llama.cpp's bundle (models/templates/*.jinja).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::server {

enum class ToolFormat {
  kHermes,      // Qwen2.5/3/3.5, Hermes: <tool_call>{"name": ..., "arguments": ...}</tool_call>
  kLlama3,      // Llama 3.x: {"name": ..., "parameters": ...} (optionally after <|python_tag|>)
  kMistral,     // [TOOL_CALLS][{"name": ..., "arguments": ...}] or [TOOL_CALLS]name[ARGS]{...}
  kDeepSeekV3,  // <｜tool▁call▁begin｜>function<｜tool▁sep｜>name\n```json\n{...}\n```<｜tool▁call▁end｜>
  kDeepSeekV31, // <｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}<｜tool▁call▁end｜>
  kKimiK2,      // <|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>
  kGlm4,        // <tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>
  kHarmony,     // gpt-oss: <|channel|>commentary to=functions.name <|constrain|>json<|message|>{...}<|call|>
};

const char* ToolFormatName(ToolFormat format);
// The format a chat template's source speaks (Hermes when it names none of the others).
ToolFormat DetectToolFormat(std::string_view template_source);

struct ParsedToolCall {
  std::string id;         // "call_<n>_<suffix>"
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct AssistantOutput {
  std::string content;
  std::string reasoning;
  std::vector<ParsedToolCall> tool_calls;
};

// Splits a completion's text. Calls that do not parse (malformed JSON, an unknown shape) stay
// in the content as text, so nothing the model wrote is lost. `id_suffix` makes the ids of
// one response unique.
AssistantOutput ParseAssistantOutput(ToolFormat format, std::string_view text, const std::string& id_suffix);

// A chat-with-tools text as it streams: what of its reasoning and content is final already, so
// that a client sees the answer as it comes and not only at the end. Content stops at the
// first marker of a call (or of reasoning) and holds back a tail that may begin one; what
// follows waits for the whole parse (Finish). Reasoning streams while inside <think> (opened
// by the text, or by the prompt: `opens_think`). gpt-oss's channels (kHarmony) wait whole.
class ToolTextStream {
 public:
  struct Delta {
    std::string reasoning;
    std::string content;
    bool empty() const { return reasoning.empty() && content.empty(); }
  };
  ToolTextStream(ToolFormat format, bool opens_think) : format_(format), opens_think_(opens_think) {}
  // The new text's final part.
  Delta Append(std::string_view piece);
  // What of `whole` (ParseAssistantOutput of all the text) has not gone out yet.
  Delta Finish(const AssistantOutput& whole);

 private:
  ToolFormat format_;
  bool opens_think_;
  std::string text_;
  size_t reasoning_sent_ = 0;  // bytes of reasoning and of content sent (after leading whitespace)
  size_t content_sent_ = 0;
  std::string reasoning_out_, content_out_;  // what went out
};

// GBNF for exactly one call of one of `tools` (OpenAI function tools; all of them, or only
// `only_name` when not empty) in `format`, arguments constrained by each tool's parameters
// schema. Errors name the offending tools[i] field.
Result<std::string> ForcedToolCallGrammar(ToolFormat format, const nlohmann::json& tools, const std::string& only_name);

}  // namespace cohort::server
