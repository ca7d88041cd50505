// JSON Schema -> GBNF, so that a grammar-constrained generation always yields JSON that
// validates against the schema (response_format json_schema, tool-call arguments). Covers
// type (and type arrays), enum, const, properties / required / additionalProperties, items /
// prefixItems / minItems / maxItems, minLength / maxLength, anyOf / oneOf (as anyOf),
// allOf of object schemas, and local $ref ("#", "#/$defs/..."), recursive ones included.
// Numbers are bounded in length (16 digits, 3 exponent digits) so a generation can end.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace cohort::engine {

class JsonSchemaGrammar {
 public:
  // strict: a validation keyword the grammar cannot enforce (pattern, minimum, ...) is an
  // error; otherwise it is ignored (tool definitions from clients, where refusing a whole
  // tool list over one keyword would break the client).
  explicit JsonSchemaGrammar(bool strict) : strict_(strict) {}

  // Adds the rules for `schema` and returns a GBNF expression that matches exactly the JSON
  // texts the grammar allows for it. Errors are kInvalidArgument "where.path: why".
  Result<std::string> Add(const nlohmann::json& schema, const std::string& where);
  // Every rule added so far, one `name ::= ...` per line.
  std::string Rules() const;

 private:
  Result<std::string> Visit(const nlohmann::json& schema, const std::string& path, int depth);
  Result<std::string> VisitTyped(const nlohmann::json& schema, const std::string& type, const std::string& path, int depth);
  Result<std::string> Object(const nlohmann::json& schema, const std::string& path, int depth);
  Result<std::string> Array(const nlohmann::json& schema, const std::string& path, int depth);
  Result<std::string> String(const nlohmann::json& schema, const std::string& path);
  Result<std::string> Ref(const std::string& ref, const std::string& path, int depth);
  Result<nlohmann::json> MergeAllOf(const nlohmann::json& all, const std::string& path, int depth);
  Status CheckKeywords(const nlohmann::json& schema, const std::string& path) const;
  // A primitive rule (value, string, number, ...) added on first use; returns its name.
  std::string Primitive(const std::string& name);
  Result<std::string> NewRule(const std::string& body, const std::string& path);

  bool strict_;
  const nlohmann::json* root_ = nullptr;
  std::string where_;
  std::map<std::string, std::string> ref_rules_;  // "#/..." -> rule name (this Add)
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body
  std::map<std::string, bool> primitives_;
  int counter_ = 0;
  int adds_ = 0;
};

// A GBNF string literal ("...") matching exactly these bytes.
std::string GbnfLiteral(std::string_view bytes);
// The whole grammar ("root ::= ...") for one schema.
Result<std::string> JsonSchemaToGbnf(const nlohmann::json& schema, const std::string& where, bool strict);
// Any JSON object (response_format json_object).
std::string JsonObjectGbnf();

}  // namespace cohort::engine
