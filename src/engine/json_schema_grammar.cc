// The schema walk: each schema becomes a GBNF expression, named rules for objects, arrays and
// $ref targets (a $ref's rule is named before its body is built, so recursion refers back to
// it). Objects emit their required properties in order and then any subset of the optional
// ones in order; keys outside `properties` are never generated, which every
// additionalProperties setting accepts.
#include "engine/json_schema_grammar.h"

#include <set>

namespace cohort::engine {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 64;
constexpr size_t kMaxRules = 4096;
constexpr int64_t kMaxCount = 4096;

// Primitive rules, by name. Whitespace and numbers are bounded so that a generation ends.
const std::map<std::string, std::string>& PrimitiveBodies() {
  static const auto* bodies = new std::map<std::string, std::string>{
      {"ws", "(\" \" | \"\\n\" [ \\t]{0,20})?"},
      {"char", "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"},
      {"string", "\"\\\"\" char* \"\\\"\""},
      {"int", "\"0\" | [1-9] [0-9]{0,15}"},
      {"integer", "\"-\"? int"},
      {"number", "\"-\"? int (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?"},
      {"boolean", "\"true\" | \"false\""},
      {"null", "\"null\""},
      {"value", "object | array | string | number | boolean | null"},
      {"object", "\"{\" ws (string ws \":\" ws value (ws \",\" ws string ws \":\" ws value)*)? ws \"}\""},
      {"array", "\"[\" ws (value (ws \",\" ws value)*)? ws \"]\""},
  };
  return *bodies;
}

// What each primitive refers to, so that adding one adds its dependencies.
const std::map<std::string, std::vector<std::string>>& PrimitiveDeps() {
  static const auto* deps = new std::map<std::string, std::vector<std::string>>{
      {"string", {"char"}}, {"integer", {"int"}}, {"number", {"int"}},
      {"value", {"object", "array", "string", "number", "boolean", "null"}},
      {"object", {"ws", "string", "value"}}, {"array", {"ws", "value"}},
  };
  return *deps;
}

// Keywords the grammar cannot enforce; strict mode refuses them.
const char* const kUnsupported[] = {
    "pattern", "patternProperties", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas",
    "propertyNames", "minProperties", "maxProperties", "uniqueItems", "contains", "minContains",
    "maxContains", "unevaluatedProperties", "unevaluatedItems"};

Status Bad(const std::string& path, const std::string& why) { return InvalidArgument(path + ": " + why); }

Result<int64_t> Count(const json& schema, const char* key, int64_t fallback, const std::string& path) {
  auto it = schema.find(key);
  if (it == schema.end()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < 0) return Bad(path + "." + key, "must be a non-negative integer");
  if (it->get<int64_t>() > kMaxCount) return Bad(path + "." + key, "at most " + std::to_string(kMaxCount));
  return it->get<int64_t>();
}

// "{m,n}" for GBNF; n < 0: unbounded.
std::string Braces(int64_t m, int64_t n) {
  std::string out = "{";
  out.append(std::to_string(m));
  out.push_back(',');
  if (n >= 0) out.append(std::to_string(n));
  out.push_back('}');
  return out;
}

}  // namespace

std::string GbnfLiteral(std::string_view bytes) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string JsonSchemaGrammar::Primitive(const std::string& name) {
  if (!primitives_[name]) {
    primitives_[name] = true;
    rules_.emplace_back(name, PrimitiveBodies().at(name));
    auto deps = PrimitiveDeps().find(name);
    if (deps != PrimitiveDeps().end()) {
      for (const std::string& d : deps->second) Primitive(d);
    }
    if (name != "ws" && name != "char" && name != "int") Primitive("ws");
  }
  return name;
}

Result<std::string> JsonSchemaGrammar::NewRule(const std::string& body, const std::string& path) {
  if (rules_.size() >= kMaxRules) return Bad(path, "the schema is too large (more than 4096 grammar rules)");
  std::string name = "s";
  name.append(std::to_string(counter_++));
  rules_.emplace_back(name, body);
  return name;
}

std::string JsonSchemaGrammar::Rules() const {
  std::string out;
  for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
  return out;
}

Result<std::string> JsonSchemaGrammar::Add(const json& schema, const std::string& where) {
  root_ = &schema;
  where_ = where;
  ref_rules_.clear();
  ++adds_;
  return Visit(schema, where, 0);
}

Status JsonSchemaGrammar::CheckKeywords(const json& schema, const std::string& path) const {
  if (!strict_) return Status::Ok();
  for (const char* key : kUnsupported) {
    if (schema.contains(key)) return Bad(path + "." + key, "this keyword is not supported in a grammar-enforced schema");
  }
  return Status::Ok();
}

Result<std::string> JsonSchemaGrammar::Ref(const std::string& ref, const std::string& path, int depth) {
  if (ref.empty() || ref[0] != '#') return Bad(path + ".$ref", "only local references (\"#...\") are supported");
  auto known = ref_rules_.find(ref);
  if (known != ref_rules_.end()) return known->second;
  const json* target = root_;
  if (ref.size() > 1) {
    json::json_pointer pointer;
    try {
      pointer = json::json_pointer(ref.substr(1));
    } catch (const json::exception&) {
      return Bad(path + ".$ref", "'" + ref + "' is not a JSON pointer");
    }
    if (!root_->contains(pointer)) return Bad(path + ".$ref", "'" + ref + "' names nothing in the schema");
    target = &(*root_)[pointer];
  }
  // Named first: a recursive reference inside the target finds this rule.
  COHORT_ASSIGN_OR_RETURN(std::string name, NewRule("", path));
  ref_rules_[ref] = name;
  const size_t index = rules_.size() - 1;
  COHORT_ASSIGN_OR_RETURN(std::string body, Visit(*target, path + ".$ref", depth + 1));
  rules_[index].second = body;
  return name;
}

Result<json> JsonSchemaGrammar::MergeAllOf(const json& all, const std::string& path, int depth) {
  if (!all.is_array() || all.empty()) return Bad(path + ".allOf", "must be a non-empty array");
  json merged = {{"type", "object"}, {"properties", json::object()}, {"required", json::array()}};
  for (size_t i = 0; i < all.size(); ++i) {
    const json* part = &all[i];
    const std::string where = path + ".allOf[" + std::to_string(i) + "]";
    for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
      const json& ref = (*part)["$ref"];
      if (!ref.is_string() || hops > kMaxDepth || depth > kMaxDepth) return Bad(where, "unresolvable $ref");
      const std::string r = ref.get<std::string>();
      if (r.empty() || r[0] != '#') return Bad(where + ".$ref", "only local references are supported");
      try {
        part = &(*root_).at(json::json_pointer(r.substr(1)));
      } catch (const json::exception&) {
        return Bad(where + ".$ref", "'" + r + "' names nothing in the schema");
      }
    }
    if (!part->is_object() || (part->contains("type") && (*part)["type"] != "object")) {
      return Bad(where, "allOf is supported only over object schemas");
    }
    if (auto p = part->find("properties"); p != part->end() && p->is_object()) {
      for (auto& [k, v] : p->items()) merged["properties"][k] = v;
    }
    if (auto r = part->find("required"); r != part->end() && r->is_array()) {
      for (const json& k : *r) merged["required"].push_back(k);
    }
  }
  return merged;
}

Result<std::string> JsonSchemaGrammar::Visit(const json& schema, const std::string& path, int depth) {
  // Named at the schema's root: the path that deep is too long to be useful.
  if (depth > kMaxDepth) return Bad(where_, "the schema nests deeper than 64 levels");
  if (schema.is_boolean()) {
    if (!schema.get<bool>()) return Bad(path, "the schema `false` matches nothing");
    return Primitive("value");
  }
  if (!schema.is_object()) return Bad(path, "a schema must be an object or a boolean");
  COHORT_RETURN_IF_ERROR(CheckKeywords(schema, path));
  if (auto ref = schema.find("$ref"); ref != schema.end()) {
    if (!ref->is_string()) return Bad(path + ".$ref", "must be a string");
    return Ref(ref->get<std::string>(), path, depth);
  }
  if (auto c = schema.find("const"); c != schema.end()) return GbnfLiteral(c->dump());
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (!e->is_array() || e->empty()) return Bad(path + ".enum", "must be a non-empty array");
    std::string alts;
    for (const json& v : *e) alts += (alts.empty() ? "" : " | ") + GbnfLiteral(v.dump());
    return NewRule(alts, path);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    auto any = schema.find(key);
    if (any == schema.end()) continue;
    if (!any->is_array() || any->empty()) return Bad(path + "." + key, "must be a non-empty array");
    std::string alts;
    for (size_t i = 0; i < any->size(); ++i) {
      COHORT_ASSIGN_OR_RETURN(std::string alt, Visit((*any)[i], path + "." + key + "[" + std::to_string(i) + "]", depth + 1));
      alts += (alts.empty() ? "" : " | ") + alt;
    }
    return NewRule(alts, path);
  }
  if (auto all = schema.find("allOf"); all != schema.end()) {
    if (all->is_array() && all->size() == 1) return Visit((*all)[0], path + ".allOf[0]", depth + 1);
    COHORT_ASSIGN_OR_RETURN(json merged, MergeAllOf(*all, path, depth));
    return Object(merged, path, depth);
  }
  auto type = schema.find("type");
  if (type == schema.end()) {
    if (schema.contains("properties")) return Object(schema, path, depth);
    if (schema.contains("items") || schema.contains("prefixItems")) return Array(schema, path, depth);
    return Primitive("value");
  }
  if (type->is_string()) return VisitTyped(schema, type->get<std::string>(), path, depth);
  if (!type->is_array() || type->empty()) return Bad(path + ".type", "must be a string or a non-empty array of strings");
  std::string alts;
  for (const json& t : *type) {
    if (!t.is_string()) return Bad(path + ".type", "must be a string or a non-empty array of strings");
    COHORT_ASSIGN_OR_RETURN(std::string alt, VisitTyped(schema, t.get<std::string>(), path, depth));
    alts += (alts.empty() ? "" : " | ") + alt;
  }
  return NewRule(alts, path);
}

Result<std::string> JsonSchemaGrammar::VisitTyped(const json& schema, const std::string& type, const std::string& path,
                                                  int depth) {
  if (type == "object") return Object(schema, path, depth);
  if (type == "array") return Array(schema, path, depth);
  if (type == "string") return String(schema, path);
  if (type == "number" || type == "integer" || type == "boolean" || type == "null") return Primitive(type);
  return Bad(path + ".type", "unknown type '" + type + "'");
}

Result<std::string> JsonSchemaGrammar::String(const json& schema, const std::string& path) {
  COHORT_ASSIGN_OR_RETURN(int64_t min, Count(schema, "minLength", 0, path));
  COHORT_ASSIGN_OR_RETURN(int64_t max, Count(schema, "maxLength", -1, path));
  if (max >= 0 && max < min) return Bad(path + ".maxLength", "is below minLength");
  if (min == 0 && max < 0) return Primitive("string");
  Primitive("char");
  return NewRule("\"\\\"\" char" + Braces(min, max) + " \"\\\"\"", path);
}

Result<std::string> JsonSchemaGrammar::Array(const json& schema, const std::string& path, int depth) {
  Primitive("ws");
  if (auto prefix = schema.find("prefixItems"); prefix != schema.end()) {
    if (!prefix->is_array()) return Bad(path + ".prefixItems", "must be an array");
    std::string body = "\"[\" ws";
    for (size_t i = 0; i < prefix->size(); ++i) {
      COHORT_ASSIGN_OR_RETURN(std::string item, Visit((*prefix)[i], path + ".prefixItems[" + std::to_string(i) + "]", depth + 1));
      body += (i == 0 ? " " : " ws \",\" ws ") + item;
    }
    return NewRule(body + " ws \"]\"", path);
  }
  std::string item = Primitive("value");
  if (auto items = schema.find("items"); items != schema.end()) {
    COHORT_ASSIGN_OR_RETURN(item, Visit(*items, path + ".items", depth + 1));
  }
  COHORT_ASSIGN_OR_RETURN(int64_t min, Count(schema, "minItems", 0, path));
  COHORT_ASSIGN_OR_RETURN(int64_t max, Count(schema, "maxItems", -1, path));
  if (max >= 0 && max < min) return Bad(path + ".maxItems", "is below minItems");
  if (max == 0) return NewRule("\"[\" ws \"]\"", path);
  const std::string more = "(ws \",\" ws " + item + ")";
  const int64_t more_min = std::max<int64_t>(min - 1, 0);
  const int64_t more_max = max < 0 ? -1 : max - 1;
  std::string list = item + " " + more + Braces(more_min, more_max);
  if (min == 0) list = "(" + list + ")?";
  return NewRule("\"[\" ws " + list + " ws \"]\"", path);
}

Result<std::string> JsonSchemaGrammar::Object(const json& schema, const std::string& path, int depth) {
  Primitive("ws");
  std::vector<std::string> required_names;
  if (auto req = schema.find("required"); req != schema.end()) {
    if (!req->is_array()) return Bad(path + ".required", "must be an array of strings");
    for (const json& r : *req) {
      if (!r.is_string()) return Bad(path + ".required", "must be an array of strings");
      if (std::find(required_names.begin(), required_names.end(), r.get<std::string>()) == required_names.end()) {
        required_names.push_back(r.get<std::string>());
      }
    }
  }
  const json empty = json::object();
  const json* props = &empty;
  if (auto p = schema.find("properties"); p != schema.end()) {
    if (!p->is_object()) return Bad(path + ".properties", "must be an object");
    props = &*p;
  }
  auto kv = [&](const std::string& key, const json& sub) -> Result<std::string> {
    COHORT_ASSIGN_OR_RETURN(std::string value, Visit(sub, path + ".properties." + key, depth + 1));
    return GbnfLiteral(json(key).dump()) + " ws \":\" ws " + value;
  };
  std::vector<std::string> required, optional;
  const std::set<std::string> req_set(required_names.begin(), required_names.end());
  for (const std::string& name : required_names) {
    auto sub = props->find(name);
    COHORT_ASSIGN_OR_RETURN(std::string r, kv(name, sub == props->end() ? json(true) : *sub));
    required.push_back(std::move(r));
  }
  for (auto& [name, sub] : props->items()) {
    if (req_set.count(name)) continue;
    COHORT_ASSIGN_OR_RETURN(std::string o, kv(name, sub));
    optional.push_back(std::move(o));
  }
  std::string body = "\"{\" ws";
  if (required.empty() && optional.empty()) {
    auto extra = schema.find("additionalProperties");
    const bool open = extra == schema.end() ? false : !(extra->is_boolean() && !extra->get<bool>());
    if (open) {
      std::string value = Primitive("value");
      if (!extra->is_boolean()) {
        COHORT_ASSIGN_OR_RETURN(value, Visit(*extra, path + ".additionalProperties", depth + 1));
      }
      const std::string pair = Primitive("string") + " ws \":\" ws " + value;
      body += " (" + pair + " (ws \",\" ws " + pair + ")*)?";
    }
    return NewRule(body + " ws \"}\"", path);
  }
  for (size_t i = 0; i < required.size(); ++i) body += (i == 0 ? " " : " ws \",\" ws ") + required[i];
  if (!optional.empty()) {
    // U_j ::= T_j | U_(j+1);  T_j ::= kv_j (ws "," ws U_(j+1))?: any subset, in order.
    std::vector<std::string> u(optional.size());
    for (size_t j = 0; j < optional.size(); ++j) {
      COHORT_ASSIGN_OR_RETURN(u[j], NewRule("", path));
    }
    const size_t base = rules_.size() - optional.size();
    for (size_t j = optional.size(); j-- > 0;) {
      const bool last = j + 1 == optional.size();
      const std::string t = last ? optional[j] : "(" + optional[j] + " (ws \",\" ws " + u[j + 1] + ")?)";
      rules_[base + j].second = last ? t : t + " | " + u[j + 1];
    }
    body += required.empty() ? " " + u[0] + "?" : " (ws \",\" ws " + u[0] + ")?";
  }
  return NewRule(body + " ws \"}\"", path);
}

Result<std::string> JsonSchemaToGbnf(const json& schema, const std::string& where, bool strict) {
  JsonSchemaGrammar g(strict);
  COHORT_ASSIGN_OR_RETURN(std::string root, g.Add(schema, where));
  return "root ::= " + root + "\n" + g.Rules();
}

std::string JsonObjectGbnf() {
  JsonSchemaGrammar g(false);
  auto root = g.Add(json{{"type", "object"}, {"additionalProperties", true}}, "");
  COHORT_CHECK(root.ok());
  return "root ::= " + *root + "\n" + g.Rules();
}

}  // namespace cohort::engine
