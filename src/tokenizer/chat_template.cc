// ChatTemplate: parses a GGUF chat template once and renders conversations with it, passing
// the variables llama.cpp passes (messages, bos/eos tokens, add_generation_prompt,
// enable_thinking, date_string, strftime_now); also the built-in fallback templates.
#include "tokenizer/chat_template.h"

#include <ctime>

#include <nlohmann/json.hpp>
#include <utility>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"
#include "tokenizer/jinja_parser.h"

namespace cohort::tokenizer {

struct ChatTemplate::Program {
  jinja::Body body;
  std::string source;
};

namespace {

struct BuiltinTemplate {
  const char* name;
  const char* source;
};

// Jinja sources reproducing llama.cpp's built-in formats of the same names (llama-chat.cpp),
// used with --chat-template NAME and when a GGUF carries no template.
constexpr BuiltinTemplate kBuiltins[] = {
    {"llama3",
     "{%- for message in messages -%}"
     "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim"
     " + '<|eot_id|>' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{%- endif -%}"},
    {"chatml",
     "{%- for message in messages -%}"
     "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"},
    {"deepseek3",
     "{%- for message in messages -%}"
     "{%- if message['role'] == 'system' -%}{{- message['content'] + '\\n\\n' -}}"
     "{%- elif message['role'] == 'user' -%}{{- '<｜User｜>' + message['content'] -}}"
     "{%- elif message['role'] == 'assistant' -%}"
     "{{- '<｜Assistant｜>' + message['content'] + '<｜end▁of▁sentence｜>' -}}"
     "{%- endif -%}"
     "{%- endfor -%}"
     "{%- if add_generation_prompt -%}{{- '<｜Assistant｜>' -}}{%- endif -%}"},
    {"mistral",
     "{%- for message in messages -%}"
     "{%- if message['role'] == 'system' -%}{{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' -}}"
     "{%- elif message['role'] == 'user' -%}{{- '[INST]' + message['content'] + '[/INST]' -}}"
     "{%- else -%}{{- message['content'] + '</s>' -}}"
     "{%- endif -%}"
     "{%- endfor -%}"},
    {"llama2",
     "{{- '[INST] ' -}}"
     "{%- set ns = namespace(inside_turn=true) -%}"
     "{%- for message in messages -%}"
     "{%- if not ns.inside_turn -%}{%- set ns.inside_turn = true -%}{{- '[INST] ' -}}{%- endif -%}"
     "{%- if message['role'] == 'system' -%}{{- message['content'] + '\\n' -}}"
     "{%- elif message['role'] == 'user' -%}{{- message['content'] + ' [/INST]' -}}"
     "{%- else -%}{{- message['content'] + '</s>' -}}{%- set ns.inside_turn = false -%}"
     "{%- endif -%}"
     "{%- endfor -%}"},
};

// JSON -> the interpreter's values (objects keep their key order: ordered_json).
jinja::Value FromJson(const nlohmann::ordered_json& j) {
  using jinja::Value;
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float: return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List items;
      for (const auto& e : j) items.push_back(FromJson(e));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::MakeDict();
      for (auto& [k, v] : j.items()) d.dict->Set(k, FromJson(v));
      return d;
    }
    default: return Value::None();
  }
}

jinja::Value MessageValue(const ChatMessage& m) {
  using jinja::Value;
  Value message = Value::MakeDict();
  message.dict->Set("role", Value::Str(m.role));
  message.dict->Set("content", Value::Str(m.content));
  if (!m.tool_calls.empty()) {
    jinja::List calls;
    for (const ChatToolCall& call : m.tool_calls) {
      Value function = Value::MakeDict();
      function.dict->Set("name", Value::Str(call.name));
      // Templates read arguments as a dict (`arguments | tojson`, `arguments.items()`), as
      // llama.cpp hands them; text that is not JSON stays text.
      const auto args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
      function.dict->Set("arguments", args.is_discarded() ? Value::Str(call.arguments) : FromJson(args));
      Value c = Value::MakeDict();
      c.dict->Set("id", Value::Str(call.id));
      c.dict->Set("type", Value::Str("function"));
      c.dict->Set("function", function);
      // Some templates (Kimi K2, GLM) also read the name and arguments at the top level.
      c.dict->Set("name", Value::Str(call.name));
      c.dict->Set("arguments", *function.dict->Find("arguments"));
      calls.push_back(std::move(c));
    }
    message.dict->Set("tool_calls", Value::MakeList(std::move(calls)));
  }
  if (!m.tool_call_id.empty()) message.dict->Set("tool_call_id", Value::Str(m.tool_call_id));
  if (!m.name.empty()) message.dict->Set("name", Value::Str(m.name));
  if (!m.reasoning_content.empty()) message.dict->Set("reasoning_content", Value::Str(m.reasoning_content));
  return message;
}

std::string FormatLocalTime(int64_t unix_s, const char* format) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm local{};
  localtime_r(&t, &local);
  char buf[64];
  size_t n = std::strftime(buf, sizeof(buf), format, &local);
  return std::string(buf, n);
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<Program> program) : program_(std::move(program)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

Result<ChatTemplate> ChatTemplate::Parse(const std::string& source) {
  auto body = jinja::Parse(source);
  if (!body.ok()) return body.status().Annotate("chat template");
  auto program = std::make_unique<Program>();
  program->body = std::move(body).value();
  program->source = source;
  return ChatTemplate(std::move(program));
}

Result<ChatTemplate> ChatTemplate::Builtin(const std::string& name) {
  for (const BuiltinTemplate& builtin : kBuiltins) {
    if (name == builtin.name) return Parse(builtin.source);
  }
  std::string known;
  for (const std::string& n : BuiltinNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("no built-in chat template '" + name + "' (known: " + known + ")");
}

std::vector<std::string> ChatTemplate::BuiltinNames() {
  std::vector<std::string> names;
  for (const BuiltinTemplate& builtin : kBuiltins) names.emplace_back(builtin.name);
  return names;
}

const std::string& ChatTemplate::source() const { return program_->source; }

Result<std::string> ChatTemplate::Apply(const ChatTemplateInputs& inputs) const {
  using jinja::Value;
  COHORT_CHECK(program_ != nullptr);
  jinja::Interpreter interp(program_->body, jinja::RenderLimits{});
  int64_t now = inputs.now_unix_s >= 0 ? inputs.now_unix_s : static_cast<int64_t>(std::time(nullptr));
  jinja::AddGlobalFunctions(interp, now);

  jinja::List messages;
  for (const ChatMessage& m : inputs.messages) messages.push_back(MessageValue(m));
  interp.SetGlobal("messages", Value::MakeList(std::move(messages)));
  if (!inputs.tools_json.empty()) {
    const auto tools = nlohmann::ordered_json::parse(inputs.tools_json, nullptr, false);
    if (tools.is_discarded() || !tools.is_array()) return InvalidArgument("chat template: tools must be a JSON array");
    interp.SetGlobal("tools", FromJson(tools));
  }
  interp.SetGlobal("bos_token", Value::Str(inputs.bos_token));
  interp.SetGlobal("eos_token", Value::Str(inputs.eos_token));
  interp.SetGlobal("enable_thinking", Value::Bool(inputs.enable_thinking));
  // Like llama.cpp, add_generation_prompt is only defined when true.
  if (inputs.add_generation_prompt) interp.SetGlobal("add_generation_prompt", Value::Bool(true));
  interp.SetGlobal("date_string", Value::Str(FormatLocalTime(now, "%d %b %Y")));
  interp.SetGlobal("datetime", Value::Str(FormatLocalTime(now, "%b %d %Y")));

  auto text = interp.Render();
  if (!text.ok()) return text.status().Annotate("chat template");
  return text;
}

}  // namespace cohort::tokenizer
