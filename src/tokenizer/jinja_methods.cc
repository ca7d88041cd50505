// Attribute access: dict entries, and the Python methods of str, list and dict that chat
// templates call (`content.split('</think>')`, `message.get('name')`, `ns.ids.append(x)`).
#include <algorithm>
#include <string>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace cohort::tokenizer::jinja {
namespace {

bool IsSpaceChar(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Python str.split(sep=None, maxsplit=-1).
Result<Value> Split(const std::string& s, const Value& sep, const Value& maxsplit_v) {
  int64_t maxsplit = maxsplit_v.kind == Kind::kInt ? maxsplit_v.i : -1;
  List parts;
  if (!sep.IsString()) {
    size_t k = 0;
    while (true) {
      while (k < s.size() && IsSpaceChar(s[k])) ++k;
      if (k >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t end = s.size();
        while (end > k && IsSpaceChar(s[end - 1])) --end;
        parts.push_back(Value::Str(s.substr(k, end - k)));
        break;
      }
      size_t start = k;
      while (k < s.size() && !IsSpaceChar(s[k])) ++k;
      parts.push_back(Value::Str(s.substr(start, k - start)));
    }
    return Value::MakeList(std::move(parts));
  }
  if (sep.s.empty()) return InvalidArgument("split: empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    size_t found = s.find(sep.s, start);
    if (found == std::string::npos) break;
    parts.push_back(Value::Str(s.substr(start, found - start)));
    start = found + sep.s.size();
  }
  parts.push_back(Value::Str(s.substr(start)));
  return Value::MakeList(std::move(parts));
}

Result<Value> AffixTest(const std::string& s, const Value& arg, bool prefix) {
  List candidates;
  if (arg.IsString()) {
    candidates.push_back(arg);
  } else if (arg.IsList()) {
    candidates = *arg.list;
  } else {
    return InvalidArgument(std::string(prefix ? "startswith" : "endswith") + " expects a string");
  }
  for (const Value& c : candidates) {
    if (!c.IsString() || c.s.size() > s.size()) continue;
    if (prefix ? s.compare(0, c.s.size(), c.s) == 0 : s.compare(s.size() - c.s.size(), c.s.size(), c.s) == 0) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

std::string MapChars(std::string s, int (*fn)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(fn(c));
  }
  return s;
}

// Python str.format with `{}`, `{0}` and `{name}` fields (no format specs) and `{{`/`}}`.
Result<Value> Format(const std::string& s, const CallArgs& a) {
  std::string out;
  size_t next_auto = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    char c = s[k];
    if ((c == '{' || c == '}') && k + 1 < s.size() && s[k + 1] == c) {
      out += c;
      ++k;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    size_t close = s.find('}', k);
    if (close == std::string::npos) return InvalidArgument("str.format: unmatched '{'");
    std::string field = s.substr(k + 1, close - k - 1);
    if (field.find_first_of(":!") != std::string::npos) return Unsupported("str.format: format specs are not supported");
    Value v;
    if (field.empty()) {
      v = a.Get(next_auto++, "");
    } else if (field.size() < 10 && std::all_of(field.begin(), field.end(), ::isdigit)) {
      v = a.Get(std::stoul(field), "");
    } else {
      v = a.Get(SIZE_MAX, field);
    }
    if (v.IsUndefined()) return InvalidArgument("str.format: no argument for field '{" + field + "}'");
    out += ToStr(v);
    k = close;
  }
  return Value::Str(std::move(out));
}

Result<Value> StringMethod(Interpreter& interp, const std::string& s, const std::string& name,
                           const CallArgs& a) {
  if (name == "startswith" || name == "endswith") return AffixTest(s, a.Get(0, "prefix"), name == "startswith");
  if (name == "split") return Split(s, a.Get(0, "sep"), a.Get(1, "maxsplit"));
  if (name == "strip") return Value::Str(StripChars(s, a.Get(0, "chars"), true, true));
  if (name == "lstrip") return Value::Str(StripChars(s, a.Get(0, "chars"), true, false));
  if (name == "rstrip") return Value::Str(StripChars(s, a.Get(0, "chars"), false, true));
  if (name == "upper") return Value::Str(MapChars(s, ::toupper));
  if (name == "lower") return Value::Str(MapChars(s, ::tolower));
  if (name == "replace") {
    CallArgs args;
    args.positional = {a.Get(0, "old"), a.Get(1, "new")};
    if (a.positional.size() > 2) args.positional.push_back(a.positional[2]);
    return ApplyFilter(interp, "replace", Value::Str(s), args);
  }
  if (name == "title" || name == "capitalize") return ApplyFilter(interp, name, Value::Str(s), CallArgs{});
  if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    Value sub = a.Get(0, "sub");
    if (!sub.IsString()) return InvalidArgument("str." + name + " expects a string");
    if (name == "count") {
      if (sub.s.empty()) return Value::Int(static_cast<int64_t>(Utf8Length(s)) + 1);
      int64_t n = 0;
      for (size_t k = s.find(sub.s); k != std::string::npos; k = s.find(sub.s, k + sub.s.size())) ++n;
      return Value::Int(n);
    }
    size_t k = name == "rfind" ? s.rfind(sub.s) : s.find(sub.s);
    if (k == std::string::npos) {
      if (name == "index") return InvalidArgument("str.index: substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(Utf8Length(s.substr(0, k))));
  }
  if (name == "join") {
    CallArgs args;
    args.positional.push_back(Value::Str(s));
    return ApplyFilter(interp, "join", a.Get(0, "iterable"), args);
  }
  if (name == "format") return Format(s, a);
  if (name == "splitlines") {
    List lines;
    size_t start = 0;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\n') {
        lines.push_back(Value::Str(s.substr(start, k - start)));
        start = k + 1;
      }
    }
    if (start < s.size()) lines.push_back(Value::Str(s.substr(start)));
    return Value::MakeList(std::move(lines));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    if (s.empty()) return Value::Bool(false);
    int (*pred)(int) = name == "isdigit" ? ::isdigit : name == "isspace" ? ::isspace : name == "isalpha" ? ::isalpha : ::isalnum;
    return Value::Bool(std::all_of(s.begin(), s.end(), [&](char c) { return pred(static_cast<unsigned char>(c)) != 0; }));
  }
  return Unsupported("unsupported string method '" + name + "'");
}

Result<Value> ListMethod(const std::shared_ptr<List>& list, const std::string& name, const CallArgs& a) {
  if (name == "append") {
    if (list->size() >= (1u << 20)) return OutOfRange("list.append: list too long");
    Value item = a.Get(0, "object");
    if (WouldCycle(item, list.get())) return InvalidArgument("list.append would make the list contain itself or nest too deeply");
    list->push_back(std::move(item));
    return Value::None();
  }
  if (name == "pop") {
    if (list->empty()) return InvalidArgument("pop from empty list");
    Value index = a.Get(0, "index");
    auto n = static_cast<int64_t>(list->size());
    int64_t k = index.kind == Kind::kInt ? index.i : n - 1;
    if (k < 0) k += n;
    if (k < 0 || k >= n) return InvalidArgument("pop index out of range");
    Value out = (*list)[static_cast<size_t>(k)];
    list->erase(list->begin() + k);
    return out;
  }
  if (name == "insert") {
    Value index = a.Get(0, "index");
    if (index.kind != Kind::kInt) return InvalidArgument("list.insert expects an integer index");
    auto n = static_cast<int64_t>(list->size());
    int64_t k = std::clamp<int64_t>(index.i < 0 ? index.i + n : index.i, 0, n);
    Value item = a.Get(1, "object");
    if (WouldCycle(item, list.get())) return InvalidArgument("list.insert would make the list contain itself or nest too deeply");
    list->insert(list->begin() + k, std::move(item));
    return Value::None();
  }
  if (name == "extend") {
    Value other = a.Get(0, "iterable");
    if (!other.IsList()) return InvalidArgument("list.extend expects a list");
    if (WouldCycle(other, list.get())) return InvalidArgument("list.extend would make the list contain itself or nest too deeply");
    List copy = *other.list;
    list->insert(list->end(), copy.begin(), copy.end());
    return Value::None();
  }
  if (name == "index" || name == "count") {
    Value item = a.Get(0, "value");
    int64_t count = 0;
    for (size_t k = 0; k < list->size(); ++k) {
      if (!Equal((*list)[k], item)) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(k));
      ++count;
    }
    if (name == "index") return InvalidArgument("list.index: value not in list");
    return Value::Int(count);
  }
  return Unsupported("unsupported list method '" + name + "'");
}

Result<Value> DictMethod(const std::shared_ptr<Dict>& dict, const std::string& name, const CallArgs& a) {
  if (name == "get") {
    Value key = a.Get(0, "key");
    const Value* found = key.IsString() ? dict->Find(key.s) : nullptr;
    if (found != nullptr) return *found;
    Value fallback = a.Get(1, "default");
    return fallback.IsUndefined() ? Value::None() : fallback;
  }
  if (name == "items" || name == "keys" || name == "values") {
    List out;
    for (const auto& [k, v] : dict->items) {
      if (name == "items") out.push_back(Value::MakeList({dict->KeyValue(k), v}));
      if (name == "keys") out.push_back(dict->KeyValue(k));
      if (name == "values") out.push_back(v);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "pop") {
    Value key = a.Get(0, "key");
    const Value* found = key.IsString() ? dict->Find(key.s) : nullptr;
    if (found == nullptr) {
      Value fallback = a.Get(1, "default");
      if (fallback.IsUndefined()) return InvalidArgument("dict.pop: key not found");
      return fallback;
    }
    Value out = *found;
    dict->Erase(key.s);
    return out;
  }
  if (name == "update") {
    Value other = a.Get(0, "other");
    for (const auto& [k, v] : a.keyword) {
      if (WouldCycle(v, dict.get())) return InvalidArgument("dict.update would make the dict contain itself or nest too deeply");
    }
    if (WouldCycle(other, dict.get()) && other.dict != dict) {
      return InvalidArgument("dict.update would make the dict contain itself or nest too deeply");
    }
    if (other.IsDict()) {
      auto copy = other.dict->items;
      for (auto& [k, v] : copy) dict->Set(k, v);
    }
    for (const auto& [k, v] : a.keyword) dict->Set(k, v);
    return Value::None();
  }
  if (name == "setdefault") {
    Value key = a.Get(0, "key");
    if (!key.IsString()) return InvalidArgument("dict.setdefault expects a string key");
    if (const Value* found = dict->Find(key.s)) return *found;
    Value fallback = a.Get(1, "default");
    if (fallback.IsUndefined()) fallback = Value::None();
    if (WouldCycle(fallback, dict.get())) return InvalidArgument("dict.setdefault would make the dict contain itself or nest too deeply");
    dict->Set(key.s, fallback);
    return fallback;
  }
  return Unsupported("unsupported dict method '" + name + "'");
}

bool IsDictMethod(const std::string& name) {
  return name == "get" || name == "items" || name == "keys" || name == "values" || name == "pop" ||
         name == "update" || name == "setdefault";
}

}  // namespace

Result<Value> GetAttribute(Interpreter& interp, const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Kind::kDict: {
      // Jinja tries the Python attribute first, so `d.items` is the method even if a key exists.
      if (IsDictMethod(name)) {
        auto dict = obj.dict;
        return Value::Function([dict, name](const CallArgs& a) { return DictMethod(dict, name, a); });
      }
      const Value* found = obj.dict->Find(name);
      return found ? *found : Value::Undefined(name);
    }
    case Kind::kString: {
      static const char* const kMethods[] = {"startswith", "endswith", "split", "strip", "lstrip", "rstrip",
                                             "upper", "lower", "replace", "title", "capitalize", "find",
                                             "rfind", "count", "index", "join", "splitlines", "isdigit",
                                             "isspace", "isalpha", "isalnum", "format"};
      for (const char* m : kMethods) {
        if (name == m) {
          std::string s = obj.s;
          Interpreter* in = &interp;
          return Value::Function([s, name, in](const CallArgs& a) { return StringMethod(*in, s, name, a); });
        }
      }
      return Value::Undefined(name);
    }
    case Kind::kList: {
      static const char* const kMethods[] = {"append", "pop", "insert", "extend", "index", "count"};
      for (const char* m : kMethods) {
        if (name == m) {
          auto list = obj.list;
          return Value::Function([list, name](const CallArgs& a) { return ListMethod(list, name, a); });
        }
      }
      return Value::Undefined(name);
    }
    case Kind::kUndefined:
      return InvalidArgument("cannot read attribute '" + name + "' of undefined value" +
                             (obj.s.empty() ? "" : " '" + obj.s + "'"));
    default: return Value::Undefined(name);
  }
}

}  // namespace cohort::tokenizer::jinja
