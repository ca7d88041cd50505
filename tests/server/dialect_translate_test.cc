// The translation layers of the Anthropic, Ollama and Responses routes: each request becomes
// the OpenAI body the chat path parses (system turns, tool calls and results, tools and
// tool_choice in OpenAI's shape, options), and each bad field is refused by its own name.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/anthropic_routes.h"
#include "server/dialect.h"
#include "server/ollama_routes.h"
#include "server/responses_routes.h"

namespace cohort::server {
namespace {

using nlohmann::json;

TEST(TranslateAnthropic, SystemBlocksAndToolsBecomeOpenAiMessages) {
  const json body = json::parse(R"({
    "model": "m", "max_tokens": 20, "system": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}],
    "temperature": 0.5, "top_k": 7, "stop_sequences": ["END"], "stream": true,
    "tools": [{"name": "weather", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "tool", "name": "weather", "disable_parallel_tool_use": true},
    "messages": [
      {"role": "user", "content": "Paris?"},
      {"role": "assistant", "content": [{"type": "text", "text": "Let me look."},
                                        {"type": "tool_use", "id": "t1", "name": "weather", "input": {"city": "Paris"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "sunny"}]},
                                   {"type": "text", "text": "And?"}]}]})");
  auto t = TranslateAnthropic(body, false);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const json expected = json::parse(R"({
    "model": "m", "max_tokens": 20, "temperature": 0.5, "stop": ["END"], "stream": true,
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Paris?"},
      {"role": "assistant", "content": "Let me look.",
       "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "t1", "content": "sunny"},
      {"role": "user", "content": "And?"}],
    "tools": [{"type": "function", "function": {"name": "weather", "description": "d", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "weather"}},
    "parallel_tool_calls": false})");
  EXPECT_EQ(t->openai, expected) << t->openai.dump(2);
  EXPECT_EQ(t->model, "m");
  EXPECT_EQ(t->top_k, 7);
}

TEST(TranslateAnthropic, BadFieldsAreNamed) {
  auto error_of = [](const char* text, bool count_only = false) {
    auto t = TranslateAnthropic(json::parse(text), count_only);
    return t.ok() ? std::string("ok") : t.status().message();
  };
  EXPECT_EQ(error_of(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})"), "max_tokens: is required");
  EXPECT_EQ(error_of(R"({"model": "m", "messages": [{"role": "user", "content": "x"}]})", true), "ok");
  EXPECT_EQ(error_of(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image"}]}]})")
                .rfind("messages[0].content[0].type: ", 0), 0u);
  EXPECT_EQ(error_of(R"({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]})"),
            "messages[0].content[0].tool_use_id: is required");
  EXPECT_EQ(error_of(R"({"model": "m", "max_tokens": 1, "tool_choice": {"type": "any"}, "messages": [{"role": "user", "content": "x"}]})"), "ok");
  EXPECT_EQ(error_of(R"({"model": "m", "max_tokens": 1, "stop_sequences": [""], "messages": [{"role": "user", "content": "x"}]})")
                .rfind("stop_sequences: ", 0), 0u);
}

TEST(TranslateOllama, OptionsAndToolCalls) {
  const json body = json::parse(R"({
    "model": "m", "format": "json",
    "options": {"temperature": 0.2, "num_predict": 30, "seed": 5, "stop": ["x"], "top_k": 3, "num_ctx": 64,
                "min_p": 0.1, "repeat_penalty": 1.1, "num_gpu": 99},
    "messages": [{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "tool", "content": "42", "tool_name": "f"}]})");
  auto t = TranslateOllama(body, true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->openai["stream"], true);  // Ollama's default
  EXPECT_EQ(t->openai["max_tokens"], 30);
  EXPECT_EQ(t->openai["seed"], 5);
  EXPECT_EQ(t->openai["stop"], json::array({"x"}));
  EXPECT_EQ(t->openai["response_format"], json({{"type", "json_object"}}));
  EXPECT_EQ(t->openai["messages"][1]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(t->top_k, 3);
  EXPECT_EQ(t->num_ctx, 64);
  EXPECT_DOUBLE_EQ(t->min_p, 0.1);
  auto gen = TranslateOllama(json::parse(R"({"model": "m", "prompt": "p", "raw": true, "stream": false,
                                             "options": {"num_predict": -1}})"), false);
  ASSERT_TRUE(gen.ok());
  EXPECT_EQ(gen->endpoint, Endpoint::kCompletion);
  EXPECT_EQ(gen->openai, json::parse(R"({"model": "m", "prompt": "p", "stream": false})"));
  auto bad = TranslateOllama(json::parse(R"({"model": "m", "prompt": "p", "options": {"top_k": -3}})"), false);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("options.top_k: ", 0), 0u);
}

TEST(TranslateResponses, InputItemsAndTools) {
  const json body = json::parse(R"({
    "model": "m", "instructions": "Sys", "max_output_tokens": 9, "text": {"format": {"type": "json_object"}},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "required",
    "input": [{"role": "developer", "content": "Dev"},
              {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Q"}]},
              {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
              {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"b\":2}"},
              {"type": "function_call_output", "call_id": "c1", "output": "r1"},
              {"type": "reasoning", "summary": []}]})");
  auto t = TranslateResponses(body);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const json& m = t->openai["messages"];
  ASSERT_EQ(m.size(), 5u) << m.dump(2);
  EXPECT_EQ(m[0], json({{"role", "system"}, {"content", "Sys"}}));
  EXPECT_EQ(m[1], json({{"role", "system"}, {"content", "Dev"}}));
  EXPECT_EQ(m[2], json({{"role", "user"}, {"content", "Q"}}));
  EXPECT_EQ(m[3]["tool_calls"].size(), 2u);  // consecutive calls are one turn
  EXPECT_EQ(m[4], json({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "r1"}}));
  EXPECT_EQ(t->openai["tools"][0], json::parse(R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}})"));
  EXPECT_EQ(t->openai["tool_choice"], "required");
  EXPECT_EQ(t->openai["max_tokens"], 9);
  EXPECT_EQ(t->openai["response_format"]["type"], "json_object");
  auto stateful = TranslateResponses(json::parse(R"({"input": "x", "previous_response_id": "resp_1"})"));
  ASSERT_FALSE(stateful.ok());
  EXPECT_EQ(stateful.status().message().rfind("previous_response_id: ", 0), 0u);
}

TEST(RenameField, TheChatParseNamesTheClientsField) {
  const std::vector<std::pair<std::string, std::string>> names = {{"max_tokens", "max_output_tokens"}};
  const Status renamed = RenameField(OutOfRange("max_tokens: must be in [1, 256]"), names);
  EXPECT_EQ(renamed.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(renamed.message(), "max_output_tokens: must be in [1, 256]");
  EXPECT_EQ(RenameField(InvalidArgument("max_tokens_x: no"), names).message(), "max_tokens_x: no");
  EXPECT_EQ(RenameField(InvalidArgument("top_p: no"), names).message(), "top_p: no");
}

}  // namespace
}  // namespace cohort::server
