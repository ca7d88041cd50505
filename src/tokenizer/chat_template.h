// Chat templates: renders `tokenizer.chat_template` (a Jinja template) for a list of
// messages with a small Jinja-subset interpreter, so the families in use (Llama 3, ChatML/Qwen,
// DeepSeek-V3/Kimi, Mistral) render exactly as their authors wrote them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace cohort::tokenizer {

// A call the assistant made, as OpenAI's message.tool_calls[i] carries it.
struct ChatToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text; templates see it parsed (a dict) when it parses
};

struct ChatMessage {
  ChatMessage() = default;
  ChatMessage(std::string r, std::string c) : role(std::move(r)), content(std::move(c)) {}
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id;              // tool: the call this result answers
  std::string name;                      // tool: the function's name, when given
  std::string reasoning_content;         // assistant: earlier reasoning, for templates that show it
};

struct ChatTemplateInputs {
  std::vector<ChatMessage> messages;
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
  // llama.cpp always passes enable_thinking (default true); Qwen3 and DeepSeek-R1 read it.
  bool enable_thinking = true;
  // The time behind strftime_now() and date_string (local time, like llama.cpp); -1 means
  // "now". Tests pin it so renderings are reproducible.
  int64_t now_unix_s = -1;
  // OpenAI tool definitions as JSON text ("[{\"type\": \"function\", ...}]"); empty: `tools`
  // stays undefined, as without tools.
  std::string tools_json;
};

class ChatTemplate {
 public:
  // Parses Jinja source. Syntax errors and unsupported statements (include, extends, ...)
  // fail here with kUnsupported and the line; an unsupported filter, test or method fails
  // Apply with kUnsupported naming it, so a template whose exotic branch is never taken (a
  // tool-call path, say) still serves plain chats.
  static Result<ChatTemplate> Parse(const std::string& source);
  // A built-in template by family name: "llama3", "chatml", "deepseek3", "mistral", "llama2"
  // (llama.cpp's formats of the same names; mistral is its v7-tekken). Unknown name: kNotFound.
  static Result<ChatTemplate> Builtin(const std::string& name);
  // The names Builtin() accepts.
  static std::vector<std::string> BuiltinNames();
  // The Jinja source it was parsed from (to recognise a family's tool-call format).
  const std::string& source() const;

  // Renders the conversation. Templates run with the variables llama.cpp passes: messages,
  // bos_token, eos_token, add_generation_prompt (defined only when true), enable_thinking,
  // date_string ("15 Mar 2025"), datetime, strftime_now(), and tools when given. A template's
  // raise_exception() is kInvalidArgument; a runaway template is kOutOfRange (output, step and
  // recursion budgets), never a hang. Thread-safe: a parsed template is immutable.
  Result<std::string> Apply(const ChatTemplateInputs& inputs) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Program;
  explicit ChatTemplate(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace cohort::tokenizer
