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

// GBNF for exactly one call of one of `tools` (OpenAI function tools; all of them, or only
// `only_name` when not empty) in `format`, arguments constrained by each tool's parameters
// schema. Errors name the offending tools[i] field.
Result<std::string> ForcedToolCallGrammar(ToolFormat format, const nlohmann::json& tools, const std::string& only_name);

}  // namespace cohort::server
