// Chat templates: renders `tokenizer.chat_template` (a Jinja template) for a list of
// messages with a small Jinja-subset interpreter, so the families in use (Llama 3, ChatML/Qwen,
// DeepSeek-V3/Kimi, Mistral) render exactly as their authors wrote them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace cohort::tokenizer {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
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
};

class ChatTemplate {
 public:
  // Parses Jinja source; a syntax error or unsupported construct is a clear Status.
  static Result<ChatTemplate> Parse(const std::string& source);
  // A built-in template by family name: "llama3", "chatml", "deepseek3", "mistral", "llama2"
  // (llama.cpp's formats of the same names; mistral is its v7-tekken). Unknown name: kNotFound.
  static Result<ChatTemplate> Builtin(const std::string& name);
  // The names Builtin() accepts.
  static std::vector<std::string> BuiltinNames();

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
