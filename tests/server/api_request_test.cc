// OpenAI request parsing and response shapes: defaults, ranges, every malformed field a 400
// with the parameter named, and the Status -> HTTP mapping.
#include "server/api_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/api_response.h"
#include "server/metrics.h"

namespace cohort::server {
namespace {

ParseLimits Limits() {
  ParseLimits l;
  l.n_vocab = 512;
  l.max_tokens_limit = 256;
  l.default_max_tokens = 200;
  l.default_seed = 7;
  return l;
}

Result<ApiRequest> Chat(const std::string& body) { return ParseApiRequest(Endpoint::kChat, body, Limits()); }

TEST(ApiRequestTest, ChatDefaultsAreOpenAis) {
  auto r = Chat(R"({"model":"m","messages":[{"role":"developer","content":"be brief"},
                  {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}]})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->messages.size(), 2u);
  EXPECT_EQ(r->messages[0].role, "system");
  EXPECT_EQ(r->messages[1].content, "hi there");
  EXPECT_EQ(r->options.sampling.temperature, 1.0f);
  EXPECT_EQ(r->options.sampling.top_p, 1.0f);
  EXPECT_EQ(r->options.sampling.top_k, 0);
  EXPECT_EQ(r->options.sampling.min_p, 0.0f);
  EXPECT_EQ(r->options.sampling.seed, 7u);
  EXPECT_EQ(r->options.max_tokens, 200);
  EXPECT_EQ(r->options.top_logprobs, -1);
  EXPECT_FALSE(r->stream);
}

TEST(ApiRequestTest, SixteenStopStringsAreAccepted) {
  // Autocomplete clients send more than OpenAI's 4; the engine's bound is 16.
  nlohmann::json stops = nlohmann::json::array();
  for (int i = 0; i < 16; ++i) stops.push_back(std::string(static_cast<size_t>(i + 1), 's'));
  auto r = Chat(R"({"messages":[{"role":"user","content":"x"}],"stop":)" + stops.dump() + "}");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->options.stop.size(), 16u);
}

TEST(ApiRequestTest, ChatFieldsAreRead) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"x"}],"stream":true,
      "stream_options":{"include_usage":true},"max_completion_tokens":9,"max_tokens":100,
      "temperature":0,"top_p":0.5,"seed":42,"stop":["a","bc"],"presence_penalty":1.5,
      "frequency_penalty":-1,"logprobs":true,"top_logprobs":3,"logit_bias":{"17":-100}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->options.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r->options.sampling.temperature, 0.0f);
  EXPECT_EQ(r->options.sampling.top_p, 0.5f);
  EXPECT_EQ(r->options.sampling.seed, 42u);
  EXPECT_EQ(r->options.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(r->options.sampling.presence_penalty, 1.5f);
  EXPECT_EQ(r->options.sampling.frequency_penalty, -1.0f);
  EXPECT_EQ(r->options.sampling.repeat_last_n, -1);
  EXPECT_EQ(r->options.top_logprobs, 3);
  EXPECT_EQ(r->options.sampling.logit_bias.at(17), -100.0f);
}

TEST(ApiRequestTest, CompletionPrompts) {
  auto text = ParseApiRequest(Endpoint::kCompletion, R"({"prompt":"Once","logprobs":2})", Limits());
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->prompt, "Once");
  EXPECT_EQ(text->options.max_tokens, 16);
  EXPECT_EQ(text->options.top_logprobs, 2);
  auto ids = ParseApiRequest(Endpoint::kCompletion, R"({"prompt":[1,2,3]})", Limits());
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
}

struct BadCase {
  Endpoint endpoint;
  const char* body;
  const char* param;  // expected start of the message
};

TEST(ApiRequestTest, MalformedInputIsInvalidArgumentNamingTheField) {
  const BadCase cases[] = {
      {Endpoint::kChat, R"({"messages":)", "body"},
      {Endpoint::kChat, R"([1,2])", "body"},
      {Endpoint::kChat, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", "body"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"\ud800"}]})", "body"},
      {Endpoint::kChat, R"({})", "messages"},
      {Endpoint::kChat, R"({"messages":[]})", "messages"},
      {Endpoint::kChat, R"({"messages":"hi"})", "messages"},
      {Endpoint::kChat, R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"temperature":3})", "temperature"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})", "max_tokens"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1e30})", "max_tokens"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":100000})", "max_tokens"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})", "max_tokens"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"seed":1.5})", "seed"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"stop":["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})", "stop"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"stop":[""]})", "stop"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"presence_penalty":9})", "presence_penalty"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", "top_logprobs"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})", "top_logprobs"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"n":17})", "n"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"abc":1}})", "logit_bias"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"logit_bias":{"9999":1}})", "logit_bias"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}})", "response_format.json_schema"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a+"}}}})", "response_format.json_schema.schema.pattern"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#"}}}})", "response_format.json_schema.schema"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"nope"}}}})", "response_format.json_schema.schema.type"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}})", "response_format"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= root"})", "grammar"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"grammar":"root ::= \"a"})", "grammar"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"grammar":5})", "grammar"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", "tools"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})", "tools[0].function"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"code","function":{"name":"f"}}]})", "tools[0].type"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]})", "tools[0].function.name"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":7}}]})", "tools[0].function.parameters"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"$ref":"#"}}}]})", "tools[0].function.parameters"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}]})", "tools[1].function.name"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})", "tool_choice"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"always"})", "tool_choice"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})", "tool_choice"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"parallel_tool_calls":"yes"})", "parallel_tool_calls"},
      {Endpoint::kChat, R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].tool_call_id"},
      {Endpoint::kChat, R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"{}"}}]}]})", "messages[0].tool_calls[0].function.name"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x","tool_calls":[]}]})", "messages[0].tool_calls"},
      {Endpoint::kChat, R"({"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":5}}]}]})", "messages[0].tool_calls[0].function.arguments"},
      {Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}],"model":7})", "model"},
      {Endpoint::kCompletion, R"({})", "prompt"},
      {Endpoint::kCompletion, R"({"prompt":[1,-2]})", "prompt"},
      {Endpoint::kCompletion, R"({"prompt":[1,512]})", "prompt"},
      {Endpoint::kCompletion, R"({"prompt":["a","b"]})", "prompt"},
      {Endpoint::kCompletion, R"({"prompt":"x","logprobs":6})", "logprobs"},
      {Endpoint::kCompletion, R"({"prompt":"x","echo":true})", "echo"},
  };
  for (const BadCase& c : cases) {
    auto r = ParseApiRequest(c.endpoint, c.body, Limits());
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(r.status().message().rfind(std::string(c.param) + ":", 0), 0u)
        << c.body << " -> " << r.status().message();
    const ApiError e = HttpErrorOf(r.status());
    EXPECT_EQ(e.http_status, 400);
    auto j = nlohmann::json::parse(ErrorJson(e));
    EXPECT_EQ(j["error"]["type"], "invalid_request_error");
    EXPECT_EQ(j["error"]["param"], c.param) << c.body;
  }
}

TEST(ApiRequestTest, JsonModeIsGrammarEnforced) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"give me an object"}],"response_format":{"type":"json_object"}})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->messages.size(), 1u);  // no instruction is added: the grammar enforces it
  EXPECT_TRUE(r->json_mode);
  EXPECT_NE(r->options.grammar, nullptr);
  auto s = Chat(R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_NE(s->options.grammar, nullptr);
}

TEST(ApiRequestTest, ToolsAndToolMessages) {
  auto r = Chat(R"({"messages":[{"role":"user","content":"w?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"ok"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],
    "tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tools.size(), 1u);
  EXPECT_EQ(r->tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r->tool_choice_name, "f");
  EXPECT_FALSE(r->parallel_tool_calls);
  ASSERT_EQ(r->messages.size(), 3u);
  ASSERT_EQ(r->messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r->messages[1].tool_calls[0].arguments, "{\"a\":1}");
  EXPECT_EQ(r->messages[2].tool_call_id, "c1");
}

TEST(ApiResponseTest, StatusToHttp) {
  EXPECT_EQ(HttpErrorOf(ResourceExhausted("full")).http_status, 429);
  EXPECT_EQ(HttpErrorOf(OutOfRange("long")).http_status, 400);
  EXPECT_EQ(HttpErrorOf(OutOfRange("long")).code, "context_length_exceeded");
  EXPECT_EQ(HttpErrorOf(Unavailable("down")).http_status, 503);
  EXPECT_EQ(HttpErrorOf(Internal("bug")).http_status, 500);
}

TEST(MetricsTest, PrometheusText) {
  Metrics m;
  m.CountResponse("/v1/chat/completions", 200);
  m.CountResponse("/nope/../etc", 404);
  m.ObserveTimeToFirstToken(0.03);
  m.ObserveTimeToFirstToken(7.0);
  const auto t0 = Metrics::Clock::now() - std::chrono::seconds(3);
  m.AddGeneratedTokens(50, t0);
  engine::SchedulerStats stats;
  stats.slots_total = 4;
  stats.slots_active = 2;
  stats.queue_depth = 1;
  const std::string text = m.Render(stats);
  EXPECT_NE(text.find("cohort_http_responses_total{path=\"/v1/chat/completions\",status=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_http_responses_total{path=\"other\",status=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_slots_active 2\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_queue_depth 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_time_to_first_token_seconds_bucket{le=\"0.05\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_time_to_first_token_seconds_bucket{le=\"10\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("cohort_generation_tokens_per_second 5\n"), std::string::npos);
}

}  // namespace
}  // namespace cohort::server
