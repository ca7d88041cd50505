// Tool-call text of each family, as their templates in llama.cpp's bundle write it: format
// detection from the real templates, parses of recorded outputs (well-formed, several calls,
// with reasoning, malformed ones left as content), and forcing grammars that accept the
// family's own rendering of a call.
#include "server/tool_calls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::server {
namespace {

using nlohmann::json;

std::string ReadTemplate(const std::string& name) {
  std::ifstream in(std::string(COHORT_EXTERNAL_DATA) + "/templates/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ToolCalls, DetectsEachFamilyFromItsTemplate) {
  const std::pair<const char*, ToolFormat> cases[] = {
      {"Qwen-Qwen3-0.6B.jinja", ToolFormat::kHermes},
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFormat::kHermes},
      {"Qwen3.5-4B.jinja", ToolFormat::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFormat::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFormat::kLlama3},
      {"deepseek-ai-DeepSeek-V3.1.jinja", ToolFormat::kDeepSeekV31},
      {"Kimi-K2-Instruct.jinja", ToolFormat::kKimiK2},
      {"GLM-4.6.jinja", ToolFormat::kGlm4},
      {"openai-gpt-oss-120b.jinja", ToolFormat::kHarmony},
      {"Mistral-Small-3.2-24B-Instruct-2506.jinja", ToolFormat::kMistral},
  };
  for (const auto& [file, format] : cases) {
    const std::string src = ReadTemplate(file);
    ASSERT_FALSE(src.empty()) << file;
    EXPECT_EQ(DetectToolFormat(src), format) << file << " -> " << ToolFormatName(DetectToolFormat(src));
  }
}

void ExpectCall(const AssistantOutput& out, size_t i, const std::string& name, const json& args) {
  ASSERT_GT(out.tool_calls.size(), i);
  EXPECT_EQ(out.tool_calls[i].name, name);
  EXPECT_EQ(json::parse(out.tool_calls[i].arguments), args);
  EXPECT_FALSE(out.tool_calls[i].id.empty());
}

TEST(ToolCalls, ParsesRecordedOutputs) {
  const json args = {{"city", "Oslo"}, {"unit", "c"}};
  // Qwen3 with reasoning, two parallel calls.
  auto q = ParseAssistantOutput(ToolFormat::kHermes,
                                "<think>\nNeed weather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                "{\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"time\", "
                                "\"arguments\": {}}\n</tool_call>",
                                "x");
  EXPECT_EQ(q.reasoning, "Need weather.");
  EXPECT_EQ(q.content, "");
  ASSERT_EQ(q.tool_calls.size(), 2u);
  ExpectCall(q, 0, "get_weather", args);
  ExpectCall(q, 1, "time", json::object());
  EXPECT_NE(q.tool_calls[0].id, q.tool_calls[1].id);
  // Llama 3.1: bare JSON with "parameters", and after <|python_tag|>.
  ExpectCall(ParseAssistantOutput(ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"c\"}}", "x"),
             0, "get_weather", args);
  ExpectCall(ParseAssistantOutput(ToolFormat::kLlama3, "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"c\"}}", "x"),
             0, "get_weather", args);
  // DeepSeek V3.1 and V3.
  ExpectCall(ParseAssistantOutput(ToolFormat::kDeepSeekV31,
                                  "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", "
                                  "\"unit\": \"c\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                                  "x"),
             0, "get_weather", args);
  auto v3 = ParseAssistantOutput(ToolFormat::kDeepSeekV3,
                                 "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
                                 "\"Oslo\", \"unit\": \"c\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                                 "x");
  ExpectCall(v3, 0, "get_weather", args);
  EXPECT_EQ(v3.content, "");
  // Kimi K2.
  ExpectCall(ParseAssistantOutput(ToolFormat::kKimiK2,
                                  "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                                  "{\"city\": \"Oslo\", \"unit\": \"c\"}<|tool_call_end|><|tool_calls_section_end|>",
                                  "x"),
             0, "get_weather", args);
  // GLM-4.6: XML arguments, a number parsed as JSON, text kept as a string.
  ExpectCall(ParseAssistantOutput(ToolFormat::kGlm4,
                                  "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n<arg_key>days</arg_key>\n"
                                  "<arg_value>3</arg_value>\n</tool_call>",
                                  "x"),
             0, "get_weather", json{{"city", "Oslo"}, {"days", 3}});
  // gpt-oss: analysis to reasoning, the commentary call.
  auto h = ParseAssistantOutput(ToolFormat::kHarmony,
                                "<|channel|>analysis<|message|>User wants weather.<|end|><|start|>assistant<|channel|>commentary "
                                "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\", \"unit\": \"c\"}<|call|>",
                                "x");
  EXPECT_EQ(h.reasoning, "User wants weather.");
  ExpectCall(h, 0, "get_weather", args);
  auto final_answer = ParseAssistantOutput(ToolFormat::kHarmony, "<|channel|>final<|message|>Hello!", "x");
  EXPECT_EQ(final_answer.content, "Hello!");
  EXPECT_TRUE(final_answer.tool_calls.empty());
  // Mistral, both shapes.
  ExpectCall(ParseAssistantOutput(ToolFormat::kMistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}]", "x"),
             0, "get_weather", args);
  ExpectCall(ParseAssistantOutput(ToolFormat::kMistral, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\", \"unit\": \"c\"}", "x"), 0,
             "get_weather", args);
}

TEST(ToolCalls, MalformedCallsStayInTheContent) {
  const char* cases[][2] = {
      {"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os</tool_call>"},
      {"hermes", "<tool_call>\n[1, 2]\n</tool_call>"},
      {"hermes", "<tool_call>\n{\"arguments\": {}}\n</tool_call>"},
      {"llama3", "{\"name\": \"get_weather\", \"parameters\": {\"city\": "},
      {"llama3", "{\"answer\": 42}"},
      {"deepseek", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{not json}<｜tool▁call▁end｜>"},
      {"kimi", "<|tool_call_begin|>functions.f:0 no argument marker<|tool_call_end|>"},
      {"mistral", "[TOOL_CALLS][{\"name\": 5}]"},
  };
  for (const auto& c : cases) {
    const std::string kind = c[0];
    const ToolFormat f = kind == "hermes" ? ToolFormat::kHermes : kind == "llama3" ? ToolFormat::kLlama3
                       : kind == "deepseek" ? ToolFormat::kDeepSeekV31 : kind == "kimi" ? ToolFormat::kKimiK2 : ToolFormat::kMistral;
    const AssistantOutput out = ParseAssistantOutput(f, c[1], "x");
    EXPECT_TRUE(out.tool_calls.empty()) << c[1];
    EXPECT_FALSE(out.content.empty()) << c[1];
  }
  EXPECT_EQ(ParseAssistantOutput(ToolFormat::kHermes, "Just text.", "x").content, "Just text.");
}

// Fed a recorded output a few bytes at a time (markers split across pieces), the stream gives
// the reasoning and the content before any call as they come, never a marker's text, and with
// Finish exactly what the whole parse has.
TEST(ToolCalls, StreamedTextGoesOutAsItBecomesFinal) {
  struct Case {
    ToolFormat format;
    bool opens_think;
    std::string text;
    std::string early_content;    // streamed before a call's marker is complete (all of it without one)
    std::string early_reasoning;  // streamed before </think>
  };
  const std::vector<Case> cases = {
      {ToolFormat::kHermes, false,
       "<think>\nNeed weather.\n</think>\n\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
       "Let me check.", "Need weather."},
      {ToolFormat::kHermes, true, "Need weather.</think>Sure: it is sunny.", "Sure: it is sunny.", "Need weather."},
      {ToolFormat::kHermes, false, "No tools needed, <b>here</b> is the answer.", "No tools needed, <b>here</b> is the answer.", ""},
      {ToolFormat::kDeepSeekV31, false,
       "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "Sure.", ""},
      {ToolFormat::kDeepSeekV31, true,  // a forced call where the prompt opened <think>
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "", ""},
      {ToolFormat::kKimiK2, false,
       "Checking.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{}<|tool_call_end|>"
       "<|tool_calls_section_end|>",
       "Checking.", ""},
      {ToolFormat::kMistral, false, "One moment.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", "One moment.", ""},
      {ToolFormat::kLlama3, false, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", "", ""},
      {ToolFormat::kLlama3, false, "It is sunny in Oslo.", "It is sunny in Oslo.", ""},
      {ToolFormat::kHermes, false, "Broken: <tool_call>\n{\"name\": 5}\n</tool_call>", "Broken:", ""},  // stays content
  };
  const std::vector<std::string> markers = {"<think>", "</think>", "<tool_call>", "<｜tool▁calls▁begin｜>", "<|tool_calls_section_begin|>",
                                            "[TOOL_CALLS]", "<|python_tag|>"};
  for (const Case& c : cases) {
    for (size_t step : {1u, 3u, 7u}) {
      ToolTextStream stream(c.format, c.opens_think);
      std::string reasoning, content;
      std::string early_content, early_reasoning;
      for (size_t at = 0; at < c.text.size(); at += step) {
        const ToolTextStream::Delta d = stream.Append(std::string_view(c.text).substr(at, step));
        reasoning += d.reasoning;
        content += d.content;
        const std::string so_far = c.text.substr(0, std::min(c.text.size(), at + step));
        bool call_seen = false;
        for (const char* m : {"<tool_call>", "<｜tool▁calls▁begin｜>", "<|tool_calls_section_begin|>", "[TOOL_CALLS]", "{\"name\""}) {
          call_seen = call_seen || so_far.find(m) != std::string::npos;
        }
        if (!call_seen) early_content = content;
        if (so_far.find("</think>") == std::string::npos) early_reasoning = reasoning;
      }
      const std::string whole_text = c.opens_think ? "<think>" + c.text : c.text;
      const AssistantOutput whole = ParseAssistantOutput(c.format, whole_text, "x");
      const ToolTextStream::Delta rest = stream.Finish(whole);
      EXPECT_EQ(reasoning + rest.reasoning, whole.reasoning) << c.text << " step " << step;
      const size_t lead = whole.content.find_first_not_of(" \n");
      EXPECT_EQ(content + rest.content, lead == std::string::npos ? "" : whole.content.substr(lead)) << c.text << " step " << step;
      EXPECT_EQ(early_content, c.early_content) << c.text << " step " << step;
      EXPECT_EQ(early_reasoning, c.early_reasoning) << c.text << " step " << step;
      if (!whole.tool_calls.empty()) {
        for (const std::string& m : markers) EXPECT_EQ(content.find(m), std::string::npos) << c.text;
      }
    }
  }
  // gpt-oss's channels wait for the whole parse.
  ToolTextStream harmony(ToolFormat::kHarmony, false);
  EXPECT_TRUE(harmony.Append("<|channel|>final<|message|>Hello!").empty());
  EXPECT_EQ(harmony.Finish(ParseAssistantOutput(ToolFormat::kHarmony, "<|channel|>final<|message|>Hello!", "x")).content, "Hello!");
}

// The forcing grammar of each format accepts the family's rendering of a call, token by
// token on Llama 3's vocabulary (its bytes: special markers spelled out).
TEST(ToolCalls, ForcingGrammarsAcceptTheirFormat) {
  auto file = gguf::File::Open(std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-llama-bpe.gguf");
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::Tokenizer::FromGguf(**file);
  ASSERT_TRUE(tok.ok());
  auto vocab = std::make_shared<const engine::TokenVocab>(**tok);
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"]}}},
      {"type":"function","function":{"name":"noop"}}])");
  const std::pair<ToolFormat, std::string> cases[] = {
      {ToolFormat::kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>"},
      {ToolFormat::kLlama3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"unit\": \"c\"}}"},
      {ToolFormat::kMistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}]"},
      {ToolFormat::kDeepSeekV31, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", \"unit\": \"c\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {ToolFormat::kKimiK2, "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Oslo\", \"unit\": \"c\"}<|tool_call_end|><|tool_calls_section_end|>"},
      {ToolFormat::kGlm4, "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>\"Oslo\"</arg_value>\n<arg_key>unit</arg_key>\n<arg_value>\"c\"</arg_value>\n</tool_call>"},
      {ToolFormat::kHarmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\", \"unit\": \"c\"}"},
  };
  for (const auto& [format, text] : cases) {
    auto gbnf = ForcedToolCallGrammar(format, tools, "");
    ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
    auto g = engine::Grammar::Parse(*gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString() << "\n" << *gbnf;
    engine::GrammarMatcher m(*g, vocab);
    for (int32_t t : (*tok)->Encode(text, false, false)) {
      ASSERT_TRUE(m.Accept(t)) << ToolFormatName(format) << ": refused '" << (*tok)->TokenToPiece(t, false) << "' in " << text;
    }
    EXPECT_TRUE(m.done()) << ToolFormatName(format);
    const AssistantOutput parsed = ParseAssistantOutput(format, text, "x");
    ASSERT_EQ(parsed.tool_calls.size(), 1u) << ToolFormatName(format);
    EXPECT_EQ(json::parse(parsed.tool_calls[0].arguments), json({{"city", "Oslo"}, {"unit", "c"}})) << ToolFormatName(format);
    // A wrong enum value is refused.
    engine::GrammarMatcher bad(*g, vocab);
    std::string wrong = text;
    wrong.replace(wrong.find("\"c\""), 3, "\"x\"");
    bool refused = false;
    for (int32_t t : (*tok)->Encode(wrong, false, false)) refused |= !bad.Accept(t);
    EXPECT_TRUE(refused) << ToolFormatName(format);
  }
  EXPECT_FALSE(ForcedToolCallGrammar(ToolFormat::kHermes, tools, "missing").ok());
}

}  // namespace
}  // namespace cohort::server
