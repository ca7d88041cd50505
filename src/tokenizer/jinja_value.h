// The value model of the Jinja-subset interpreter: Python-like dynamic values (undefined, none,
// bool, int, float, str, list, dict, callable) with Python's str()/repr(), truthiness,
// equality and json.dumps formatting, which is what chat templates observe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace cohort::tokenizer::jinja {

enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

struct Value;
struct Dict;
struct CallArgs;
using List = std::vector<Value>;
// A builtin function, a bound method or a macro; arguments as Jinja passes them.
using Callable = std::function<Result<Value>(const CallArgs& args)>;

// Lists, dicts and callables are shared by reference, as in Python: `ns.ids.append(x)` and
// `set ns.attr = v` must be visible through every name that refers to the same object.
struct Value {
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;                    // kString; for kUndefined the name, for error messages
  std::shared_ptr<List> list;       // kList
  std::shared_ptr<Dict> dict;       // kDict
  std::shared_ptr<Callable> fn;     // kCallable

  static Value Undefined(std::string name = "") {
    Value v;
    v.s = std::move(name);
    return v;
  }
  static Value None() { return Make(Kind::kNone); }
  static Value Bool(bool x) {
    Value v = Make(Kind::kBool);
    v.b = x;
    return v;
  }
  static Value Int(int64_t x) {
    Value v = Make(Kind::kInt);
    v.i = x;
    return v;
  }
  static Value Float(double x) {
    Value v = Make(Kind::kFloat);
    v.f = x;
    return v;
  }
  static Value Str(std::string x) {
    Value v = Make(Kind::kString);
    v.s = std::move(x);
    return v;
  }
  static Value MakeList(List items = {});
  static Value MakeDict();
  static Value Function(Callable fn);

  bool IsUndefined() const { return kind == Kind::kUndefined; }
  bool IsNone() const { return kind == Kind::kNone; }
  bool IsString() const { return kind == Kind::kString; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool IsList() const { return kind == Kind::kList; }
  bool IsDict() const { return kind == Kind::kDict; }
  bool IsCallable() const { return kind == Kind::kCallable; }
  double AsDouble() const { return kind == Kind::kFloat ? f : static_cast<double>(kind == Kind::kBool ? b : i); }

 private:
  static Value Make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// Insertion-ordered string-keyed map (Python dicts keep insertion order; templates rely on it
// for `items()` and `tojson`).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;

  const Value* Find(const std::string& key) const;
  Value* Find(const std::string& key);
  void Set(const std::string& key, Value value);
  bool Erase(const std::string& key);

  // Numeric keys (`{512: 128}`) are stored under their decimal text and remembered here, so
  // iteration hands back numbers while lookups stay string-based.
  void SetTyped(const Value& key, Value value);
  Value KeyValue(const std::string& key) const;
  std::vector<std::pair<std::string, Value>> typed_keys;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `index`, else the keyword `name`, else undefined.
  Value Get(size_t index, const std::string& name) const;
};

const char* KindName(Kind kind);
bool Truthy(const Value& v);
// Python ==: 1 == 1.0, lists and dicts compare by content.
bool Equal(const Value& a, const Value& b);
// Python str(): what `{{ v }}` prints. None -> "None", True -> "True", lists as repr.
std::string ToStr(const Value& v);
// Python repr() of a value inside a container ('quoted' strings).
std::string Repr(const Value& v);
// Python's repr of a float: shortest round-trip digits, "1.0", "1e-05", "inf".
std::string FloatRepr(double x);

struct JsonOptions {
  int indent = -1;                      // < 0: single line
  std::string item_separator = ", ";    // json.dumps defaults; "," when indenting
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;            // transformers passes ensure_ascii=False
};
// json.dumps(v) as transformers' tojson filter computes it. Undefined/callables are errors.
Result<std::string> ToJson(const Value& v, const JsonOptions& options);

// Whether storing `v` inside the container `container` (a List* or Dict*) would make the
// container reach itself. Mutations refuse that: cycles would leak (shared_ptr) and make
// printing unbounded. The search stops at a nesting depth that real templates never reach.
bool WouldCycle(const Value& v, const void* container);

// Python strings index by code point; these map code point positions onto UTF-8 bytes.
size_t Utf8Length(const std::string& s);
// Byte offsets of each code point start, plus s.size() at the end.
std::vector<size_t> Utf8Offsets(const std::string& s);

}  // namespace cohort::tokenizer::jinja
