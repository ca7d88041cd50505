// Renders the real chat templates of the model families cohort serves (fetched from llama.cpp's
// models/templates by scripts/fetch-test-data.sh) and compares them byte for byte with the
// expected prompts in tests/data/chat/, derived by hand from each template and the published
// formats; also the built-in templates and the error paths of the public API.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace cohort::tokenizer {
namespace {

constexpr int64_t kNoon15Mar2025 = 1742040000;  // 2025-03-15 12:00:00 UTC

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The fetched templates are required: a missing file fails the test with the fix.
std::string ExternalTemplate(const std::string& name) {
  std::string path = std::string(COHORT_EXTERNAL_DATA) + "/templates/" + name;
  EXPECT_TRUE(std::filesystem::exists(path))
      << path << " is missing: run scripts/fetch-test-data.sh to fetch llama.cpp's chat templates";
  return ReadFile(path);
}

ChatTemplateInputs Conversation(const std::string& bos, const std::string& eos) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"system", "You are a helpful assistant."},
                     {"user", "Hello!"},
                     {"assistant", "Hi there. How can I help?"},
                     {"user", "What is 2+2?"}};
  inputs.add_generation_prompt = true;
  inputs.bos_token = bos;
  inputs.eos_token = eos;
  inputs.now_unix_s = kNoon15Mar2025;
  return inputs;
}

struct RealTemplateCase {
  const char* file;  // under templates/, without .jinja; expected output in tests/data/chat/<file>.txt
  const char* bos;
  const char* eos;
};

class RealTemplateTest : public ::testing::TestWithParam<RealTemplateCase> {};

TEST_P(RealTemplateTest, RendersConversationExactly) {
  const RealTemplateCase& c = GetParam();
  std::string source = ExternalTemplate(std::string(c.file) + ".jinja");
  ASSERT_FALSE(source.empty());
  auto tmpl = ChatTemplate::Parse(source);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  auto text = tmpl->Apply(Conversation(c.bos, c.eos));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  std::string expected_path = std::string(COHORT_TEST_DATA) + "/chat/" + c.file + ".txt";
  ASSERT_TRUE(std::filesystem::exists(expected_path)) << expected_path;
  EXPECT_EQ(*text, ReadFile(expected_path));
}

INSTANTIATE_TEST_SUITE_P(
    Families, RealTemplateTest,
    ::testing::Values(
        RealTemplateCase{"meta-llama-Llama-3.1-8B-Instruct", "<|begin_of_text|>", "<|eot_id|>"},
        RealTemplateCase{"meta-llama-Llama-3.2-3B-Instruct", "<|begin_of_text|>", "<|eot_id|>"},
        RealTemplateCase{"meta-llama-Llama-3.3-70B-Instruct", "<|begin_of_text|>", "<|eot_id|>"},
        RealTemplateCase{"Qwen-Qwen2.5-7B-Instruct", "", "<|im_end|>"},
        RealTemplateCase{"Qwen-Qwen3-0.6B", "", "<|im_end|>"},
        RealTemplateCase{"deepseek-ai-DeepSeek-V3.1", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
        RealTemplateCase{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "<｜begin▁of▁sentence｜>",
                         "<｜end▁of▁sentence｜>"},
        RealTemplateCase{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<｜begin▁of▁sentence｜>",
                         "<｜end▁of▁sentence｜>"},
        RealTemplateCase{"Kimi-K2-Instruct", "[BOS]", "[EOS]"},
        RealTemplateCase{"mistralai-Mistral-Nemo-Instruct-2407", "<s>", "</s>"},
        RealTemplateCase{"Mistral-Small-3.2-24B-Instruct-2506", "<s>", "</s>"},
        // The harmony format: system block with the date, instructions as a developer
        // message, assistant turns on the final channel.
        RealTemplateCase{"openai-gpt-oss-120b", "<|startoftext|>", "<|return|>"}),
    [](const ::testing::TestParamInfo<RealTemplateCase>& info) {
      std::string name;
      for (char ch : std::string(info.param.file)) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

Result<std::string> RenderExternal(const std::string& file, const ChatTemplateInputs& inputs) {
  auto tmpl = ChatTemplate::Parse(ExternalTemplate(file));
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->Apply(inputs);
}

// Without a system message Kimi inserts its default one; the newline after it survives only
// because of lstrip_blocks/trim_blocks, so this pins transformers' whitespace settings.
TEST(RealTemplates, KimiDefaultSystemPromptKeepsItsNewline) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "Hello!"}};
  auto text = RenderExternal("Kimi-K2-Instruct.jinja", inputs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>\n"
            "<|im_user|>user<|im_middle|>Hello!<|im_end|><|im_assistant|>assistant<|im_middle|>");
}

TEST(RealTemplates, MistralSmallDefaultSystemPromptCarriesTheDate) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "Hi"}};
  inputs.bos_token = "<s>";
  inputs.now_unix_s = kNoon15Mar2025;
  auto text = RenderExternal("Mistral-Small-3.2-24B-Instruct-2506.jinja", inputs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->rfind("<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language Model", 0), 0u) << *text;
  EXPECT_NE(text->find("The current date is 2025-03-15.\n\nWhen you're not sure"), std::string::npos) << *text;
  EXPECT_TRUE(text->ends_with("cannot perform the requested action at the moment.[/SYSTEM_PROMPT][INST]Hi[/INST]"))
      << *text;
}

TEST(RealTemplates, MistralRejectsNonAlternatingRoles) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "a"}, {"user", "b"}};
  auto text = RenderExternal("mistralai-Mistral-Nemo-Instruct-2407.jinja", inputs);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(text.status().message().find("conversation roles must alternate user/assistant"), std::string::npos)
      << text.status().ToString();
}

TEST(RealTemplates, Qwen3SplitsThinkingOfTheLastTurn) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "2+2?"}, {"assistant", "<think>\nadd them\n</think>\n\n4"}};
  inputs.add_generation_prompt = false;
  auto text = RenderExternal("Qwen-Qwen3-0.6B.jinja", inputs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nadd them\n</think>\n\n4<|im_end|>\n");
}

TEST(RealTemplates, Qwen3WithThinkingDisabledAddsEmptyThinkBlock) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "hi"}};
  inputs.enable_thinking = false;
  auto text = RenderExternal("Qwen-Qwen3-0.6B.jinja", inputs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(RealTemplates, Llama3TrimsMessageContent) {
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "  spaced out \n"}};
  inputs.bos_token = "<|begin_of_text|>";
  inputs.now_unix_s = kNoon15Mar2025;
  auto text = RenderExternal("meta-llama-Llama-3.1-8B-Instruct.jinja", inputs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 15 Mar 2025\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nspaced out<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Every template llama.cpp ships (70 families) must parse and render a plain conversation,
// except two that Python Jinja2 rejects the same way: Gemma 2 raises (no system role) and
// firefunction-v2 needs a `functions` variable.
// Their exact output was cross-checked against Python Jinja2 with
// tests/data/chat/render_reference.py.
TEST(RealTemplates, EveryFetchedTemplateParsesAndRenders) {
  std::string dir = std::string(COHORT_EXTERNAL_DATA) + "/templates";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir << " is missing: run scripts/fetch-test-data.sh";
  int rendered = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    SCOPED_TRACE(entry.path().filename().string());
    auto tmpl = ChatTemplate::Parse(ReadFile(entry.path().string()));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
    auto text = tmpl->Apply(Conversation("<BOS>", "<EOS>"));
    std::string stem = entry.path().stem().string();
    if (stem == "google-gemma-2-2b-it" || stem == "fireworks-ai-llama-3-firefunction-v2") {
      ASSERT_FALSE(text.ok());
      const char* why = stem[0] == 'g' ? "raised an exception: System role not supported" : "'functions' is undefined";
      EXPECT_NE(text.status().message().find(why), std::string::npos) << text.status().ToString();
      continue;
    }
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_NE(text->find("What is 2+2?"), std::string::npos) << *text;
    ++rendered;
  }
  EXPECT_GE(rendered, 68);
}

// ---- built-in templates: llama.cpp's formats of the same names ----

std::string RenderBuiltin(const std::string& name, bool add_generation_prompt = true) {
  auto tmpl = ChatTemplate::Builtin(name);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  if (!tmpl.ok()) return "";
  ChatTemplateInputs inputs = Conversation("<BOS>", "<EOS>");
  inputs.add_generation_prompt = add_generation_prompt;
  auto text = tmpl->Apply(inputs);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

TEST(BuiltinTemplates, Llama3) {
  EXPECT_EQ(RenderBuiltin("llama3"),
            "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there. How can I help?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(BuiltinTemplates, ChatmlWithAndWithoutGenerationPrompt) {
  const std::string body =
      "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
      "<|im_start|>assistant\nHi there. How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
  EXPECT_EQ(RenderBuiltin("chatml"), body + "<|im_start|>assistant\n");
  EXPECT_EQ(RenderBuiltin("chatml", false), body);
}

TEST(BuiltinTemplates, Deepseek3) {
  EXPECT_EQ(RenderBuiltin("deepseek3"),
            "You are a helpful assistant.\n\n<｜User｜>Hello!<｜Assistant｜>Hi there. How can I help?"
            "<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜>");
}

TEST(BuiltinTemplates, MistralV7Tekken) {
  EXPECT_EQ(RenderBuiltin("mistral"),
            "[SYSTEM_PROMPT]You are a helpful assistant.[/SYSTEM_PROMPT][INST]Hello![/INST]"
            "Hi there. How can I help?</s>[INST]What is 2+2?[/INST]");
}

TEST(BuiltinTemplates, Llama2) {
  EXPECT_EQ(RenderBuiltin("llama2"),
            "[INST] You are a helpful assistant.\nHello! [/INST]Hi there. How can I help?</s>"
            "[INST] What is 2+2? [/INST]");
}

TEST(BuiltinTemplates, UnknownNameIsNotFoundAndListsKnownNames) {
  auto tmpl = ChatTemplate::Builtin("vicuna-9000");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_EQ(tmpl.status().code(), StatusCode::kNotFound);
  EXPECT_NE(tmpl.status().message().find("llama3"), std::string::npos) << tmpl.status().ToString();
  EXPECT_EQ(ChatTemplate::BuiltinNames().size(), 5u);
}

// ---- API errors ----

TEST(ChatTemplateApi, UnsupportedSyntaxIsAClearError) {
  auto tmpl = ChatTemplate::Parse("hello\n{% include 'other.jinja' %}");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_EQ(tmpl.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(tmpl.status().message().find("line 2"), std::string::npos) << tmpl.status().ToString();
  EXPECT_NE(tmpl.status().message().find("include"), std::string::npos) << tmpl.status().ToString();
}

TEST(ChatTemplateApi, UnclosedBlockIsAnError) {
  auto tmpl = ChatTemplate::Parse("{% for m in messages %}{{ m.content }}");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_NE(tmpl.status().message().find("endfor"), std::string::npos) << tmpl.status().ToString();
}

TEST(ChatTemplateApi, RunawayLoopIsBounded) {
  auto tmpl = ChatTemplate::Parse(
      "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  auto text = tmpl->Apply(ChatTemplateInputs{});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kOutOfRange) << text.status().ToString();
}

TEST(ChatTemplateApi, InfiniteRecursionIsBounded) {
  auto tmpl = ChatTemplate::Parse("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  auto text = tmpl->Apply(ChatTemplateInputs{});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), StatusCode::kOutOfRange) << text.status().ToString();
}

TEST(ChatTemplateApi, MovedTemplateStillRenders) {
  auto tmpl = ChatTemplate::Builtin("chatml");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplate moved = std::move(tmpl).value();
  ChatTemplateInputs inputs;
  inputs.messages = {{"user", "x"}};
  auto text = moved.Apply(inputs);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
}

}  // namespace
}  // namespace cohort::tokenizer
