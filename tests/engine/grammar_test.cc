// The grammar engine on Llama 3's 128K vocabulary: GBNF parse errors, masks equal to the
// token-by-token check, and sampling under JSON-schema grammars from random logits always
// yields JSON that satisfies the schema. grammar_bench_test.cc times it.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "engine/sampling.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace cohort::engine {
namespace {

using nlohmann::json;

const tokenizer::Tokenizer& Llama3() {
  static std::unique_ptr<tokenizer::Tokenizer> tok = [] {
    const std::string path = std::string(COHORT_EXTERNAL_DATA) + "/vocab/ggml-vocab-llama-bpe.gguf";
    auto file = gguf::File::Open(path);
    COHORT_CHECK(file.ok());
    auto t = tokenizer::Tokenizer::FromGguf(**file);
    COHORT_CHECK(t.ok());
    return std::move(t).value();
  }();
  return *tok;
}

std::shared_ptr<const TokenVocab> Vocab() {
  static std::shared_ptr<const TokenVocab> vocab = std::make_shared<const TokenVocab>(Llama3());
  return vocab;
}

std::shared_ptr<const Grammar> MustParse(std::string_view gbnf) {
  auto g = Grammar::Parse(gbnf);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << gbnf;
  return g.ok() ? *g : nullptr;
}

bool MaskHas(const std::vector<uint64_t>& mask, int32_t id) { return (mask[id >> 6] >> (id & 63)) & 1u; }

// Samples from random logits under the grammar until it is done (or max_tokens), checking
// every 61st token's mask bit against Allows() on the way.
std::string Generate(std::shared_ptr<const Grammar> g, uint64_t seed, int max_tokens, bool* finished) {
  const tokenizer::Tokenizer& tok = Llama3();
  SamplingParams params = GreedyParams();
  params.temperature = 1.0f;
  params.seed = seed;
  Sampler sampler(params, tok.n_vocab());
  sampler.SetGrammar(std::make_unique<GrammarMatcher>(g, Vocab()));
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> noise(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::string text;
  *finished = false;
  for (int i = 0; i < max_tokens; ++i) {
    for (float& l : logits) l = noise(rng);
    const int32_t token = sampler.Sample(logits);
    if (i % 7 == 0) {
      const std::vector<uint64_t>& mask = sampler.grammar()->Mask();
      for (int32_t id = i % 61; id < tok.n_vocab(); id += 61) {
        EXPECT_EQ(MaskHas(mask, id), sampler.grammar()->Allows(id)) << "token " << id << " after '" << text << "'";
      }
    }
    EXPECT_TRUE(sampler.grammar()->Allows(token)) << "sampled a refused token " << token;
    sampler.AcceptSampled(token);
    if (tok.IsEndOfGeneration(token)) {
      *finished = true;
      break;
    }
    text += tok.TokenToPiece(token, false);
    if (sampler.grammar_done()) {
      *finished = true;
      break;
    }
  }
  return text;
}

TEST(Grammar, ParseErrorsNameTheProblem) {
  auto undefined = Grammar::Parse("root ::= foo");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("'foo' is used but not defined"), std::string::npos);
  auto left = Grammar::Parse("root ::= root \"a\" | \"b\"");
  ASSERT_FALSE(left.ok());
  EXPECT_NE(left.status().message().find("left-recursive"), std::string::npos);
  auto hidden = Grammar::Parse("root ::= x? root \"a\"\nx ::= \"b\"");
  ASSERT_FALSE(hidden.ok());  // x is nullable, so root can come first in root
  auto syntax = Grammar::Parse("root ::= \"a\"\n\nfoo ::= \"unterminated");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("line 3"), std::string::npos) << syntax.status().message();
  EXPECT_FALSE(Grammar::Parse("root ::= \"a\"{5,2}").ok());
  EXPECT_FALSE(Grammar::Parse("root ::= \"a\"{100000}").ok());
  EXPECT_FALSE(Grammar::Parse("nope ::= \"a\"").ok());  // no root
  EXPECT_FALSE(Grammar::Parse("root ::= [z-a]").ok());
}

TEST(Grammar, AlternativesAndClasses) {
  auto g = MustParse("root ::= (\"yes\" | \"no\") [0-9]{2} \"é\"? # comment\n");
  ASSERT_NE(g, nullptr);
  GrammarMatcher m(g, Vocab());
  const tokenizer::Tokenizer& tok = Llama3();
  const int32_t yes = tok.Find("yes"), no = tok.Find("no"), maybe = tok.Find("maybe");
  ASSERT_GE(yes, 0);
  ASSERT_GE(no, 0);
  ASSERT_GE(maybe, 0);
  EXPECT_TRUE(m.Allows(yes));
  EXPECT_TRUE(m.Allows(no));
  EXPECT_FALSE(m.Allows(maybe));
  EXPECT_FALSE(m.Allows(tok.eos()));  // not complete yet
  ASSERT_TRUE(m.Accept(yes));
  const int32_t d12 = tok.Find("12"), d123 = tok.Find("123");
  ASSERT_GE(d12, 0);
  ASSERT_GE(d123, 0);
  EXPECT_TRUE(m.Allows(d12));
  EXPECT_FALSE(m.Allows(d123));
  ASSERT_TRUE(m.Accept(d12));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.done());  // "é" may follow
  const std::vector<uint64_t>& mask = m.Mask();
  for (int32_t eog : Vocab()->end_of_generation()) EXPECT_TRUE(MaskHas(mask, eog));
  int allowed = 0;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) allowed += MaskHas(mask, id);
  // "é" itself, its first byte alone, and the end-of-generation tokens.
  EXPECT_GE(allowed, 2);
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (MaskHas(mask, id) && !tok.IsEndOfGeneration(id)) {
      const std::string piece = tok.TokenToPiece(id, false);
      EXPECT_TRUE(piece == "é" || piece == "\xC3") << id << " '" << piece << "'";
    }
  }
  EXPECT_FALSE(m.Accept(maybe));
  EXPECT_TRUE(m.failed());
}

TEST(Grammar, JsonSchemaOutputsValidate) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 12},
      "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
      "ok": {"type": "boolean"},
      "note": {"type": ["string", "null"], "maxLength": 5}
    },
    "required": ["name", "age", "tags"],
    "additionalProperties": false
  })");
  auto gbnf = JsonSchemaToGbnf(schema, "schema", true);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  auto g = MustParse(*gbnf);
  ASSERT_NE(g, nullptr);
  int finished_count = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    bool finished = false;
    const std::string text = Generate(g, seed, 400, &finished);
    if (!finished) continue;
    ++finished_count;
    const json v = json::parse(text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << text;
    ASSERT_TRUE(v.is_object()) << text;
    ASSERT_TRUE(v["name"].is_string()) << text;
    EXPECT_LE(v["name"].get<std::string>().size(), 12u * 4) << text;
    ASSERT_TRUE(v["age"].is_number_integer()) << text;
    ASSERT_TRUE(v["tags"].is_array()) << text;
    EXPECT_GE(v["tags"].size(), 1u);
    EXPECT_LE(v["tags"].size(), 3u);
    for (const json& t : v["tags"]) EXPECT_TRUE(t == "a" || t == "b" || t == "c") << text;
    for (auto& [k, val] : v.items()) {
      EXPECT_TRUE(k == "name" || k == "age" || k == "tags" || k == "ok" || k == "note") << text;
      if (k == "ok") {
        EXPECT_TRUE(val.is_boolean());
      }
      if (k == "note") {
        EXPECT_TRUE(val.is_null() || val.is_string());
      }
    }
  }
  EXPECT_GE(finished_count, 1);
}

TEST(Grammar, JsonSchemaErrorsNameTheField) {
  auto strict = JsonSchemaToGbnf(json::parse(R"({"type":"object","properties":{"a":{"type":"string","pattern":"x+"}}})"), "schema", true);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().message().rfind("schema.properties.a.pattern:", 0), 0u) << strict.status().message();
  EXPECT_TRUE(JsonSchemaToGbnf(json::parse(R"({"type":"string","pattern":"x+"})"), "schema", false).ok());
  auto type = JsonSchemaToGbnf(json::parse(R"({"type":"strnig"})"), "schema", true);
  ASSERT_FALSE(type.ok());
  EXPECT_NE(type.status().message().find("schema.type"), std::string::npos);
  EXPECT_FALSE(JsonSchemaToGbnf(json::parse(R"({"$ref":"#/$defs/none"})"), "schema", true).ok());
  EXPECT_FALSE(JsonSchemaToGbnf(json::parse(R"({"$ref":"http://x/y"})"), "schema", true).ok());
  // A schema that is itself: it compiles to a left-recursive grammar, which Parse refuses.
  auto self = JsonSchemaToGbnf(json::parse(R"({"$ref":"#"})"), "schema", true);
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(Grammar::Parse(*self).ok());
  // A recursive schema that makes progress is fine.
  auto tree = JsonSchemaToGbnf(json::parse(R"({"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#"},"maxItems":2}}})"), "schema", true);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_TRUE(Grammar::Parse(*tree).ok()) << *tree;
  json deep = {{"type", "string"}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_FALSE(JsonSchemaToGbnf(deep, "schema", true).ok());
}

TEST(Grammar, JsonObjectGrammarAcceptsObjectsOnly) {
  auto g = MustParse(JsonObjectGbnf());
  ASSERT_NE(g, nullptr);
  const tokenizer::Tokenizer& tok = Llama3();
  GrammarMatcher m(g, Vocab());
  const int32_t brace = tok.Find("{"), bracket = tok.Find("[");
  EXPECT_TRUE(m.Allows(brace));
  EXPECT_FALSE(m.Allows(bracket));
  for (int32_t t : tok.Encode("{\"a\": [1, 2.5e3, true, null, {\"b\": \"c\\n\"}]}", false, false)) {
    ASSERT_TRUE(m.Accept(t)) << tok.TokenToPiece(t, false);
  }
  EXPECT_TRUE(m.accepting());
}

}  // namespace
}  // namespace cohort::engine
