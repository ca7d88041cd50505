// Jinja filters (`x | name`), tests (`x is name`) and global functions, as chat templates use
// them; tojson follows transformers' override (json.dumps, ensure_ascii=False).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <string>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace cohort::tokenizer::jinja {
namespace {

Result<List> AsItems(const Value& v, const std::string& filter) {
  if (v.IsList()) return *v.list;
  if (v.IsUndefined()) return List{};
  if (v.IsDict()) {
    List keys;
    for (const auto& [k, value] : v.dict->items) keys.push_back(v.dict->KeyValue(k));
    return keys;
  }
  if (v.IsString()) {
    List chars;
    std::vector<size_t> offsets = Utf8Offsets(v.s);
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      chars.push_back(Value::Str(v.s.substr(offsets[k], offsets[k + 1] - offsets[k])));
    }
    return chars;
  }
  return InvalidArgument("filter '" + filter + "' expects a sequence, got a " + KindName(v.kind));
}

// Follows a dotted attribute path ("function.name") the way Jinja's attribute= arguments do.
Result<Value> AttributePath(Interpreter& interp, Value v, const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.IsUndefined()) return v;
    if (!part.empty() && part.size() < 10 && std::all_of(part.begin(), part.end(), ::isdigit) && v.IsList()) {
      COHORT_ASSIGN_OR_RETURN(v, GetItem(v, Value::Int(std::stoll(part))));
    } else {
      COHORT_ASSIGN_OR_RETURN(v, GetAttribute(interp, v, part));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return v;
}

// select/reject/selectattr/rejectattr: keep items whose (attribute's) test result is `keep`.
Result<Value> SelectFilter(Interpreter& interp, const Value& value, const CallArgs& args, bool by_attr,
                           bool keep, const std::string& filter) {
  if (!Truthy(value)) return Value::MakeList();  // Jinja iterates only `if value`
  COHORT_ASSIGN_OR_RETURN(List items, AsItems(value, filter));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    Value a = args.Get(next++, "attribute");
    if (!a.IsString()) return InvalidArgument(filter + " expects an attribute name");
    attr = a.s;
  }
  Value test = args.Get(next++, "test");
  CallArgs test_args;
  for (size_t k = next; k < args.positional.size(); ++k) test_args.positional.push_back(args.positional[k]);
  List out;
  for (const Value& item : items) {
    COHORT_RETURN_IF_ERROR(interp.Step());
    Value subject = item;
    if (by_attr) {
      COHORT_ASSIGN_OR_RETURN(subject, AttributePath(interp, item, attr));
    }
    bool pass = Truthy(subject);
    if (test.IsString()) {
      COHORT_ASSIGN_OR_RETURN(pass, ApplyTest(test.s, subject, test_args));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> MapFilter(Interpreter& interp, const Value& value, const CallArgs& args) {
  if (!Truthy(value)) return Value::MakeList();  // Jinja iterates only `if value`
  COHORT_ASSIGN_OR_RETURN(List items, AsItems(value, "map"));
  Value attribute = args.Get(99, "attribute");
  List out;
  for (const Value& item : items) {
    COHORT_RETURN_IF_ERROR(interp.Step());
    if (attribute.IsString()) {
      COHORT_ASSIGN_OR_RETURN(Value v, AttributePath(interp, item, attribute.s));
      Value fallback = args.Get(99, "default");
      out.push_back(v.IsUndefined() && !fallback.IsUndefined() ? fallback : v);
      continue;
    }
    if (args.positional.empty() || !args.positional[0].IsString()) return InvalidArgument("map expects a filter name or attribute=");
    CallArgs rest;
    rest.positional.assign(args.positional.begin() + 1, args.positional.end());
    COHORT_ASSIGN_OR_RETURN(Value v, ApplyFilter(interp, args.positional[0].s, item, rest));
    out.push_back(std::move(v));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> ToJsonFilter(const Value& value, const CallArgs& args) {
  JsonOptions options;
  Value indent = args.Get(99, "indent");
  if (!args.positional.empty() && args.positional[0].kind == Kind::kInt) indent = args.positional[0];
  if (indent.kind == Kind::kInt) {
    options.indent = static_cast<int>(std::clamp<int64_t>(indent.i, 0, 64));
    options.item_separator = ",";
  }
  Value separators = args.Get(99, "separators");
  if (separators.IsList() && separators.list->size() == 2 && (*separators.list)[0].IsString() &&
      (*separators.list)[1].IsString()) {
    options.item_separator = (*separators.list)[0].s;
    options.key_separator = (*separators.list)[1].s;
  }
  options.sort_keys = Truthy(args.Get(99, "sort_keys"));
  options.ensure_ascii = Truthy(args.Get(99, "ensure_ascii"));
  COHORT_ASSIGN_OR_RETURN(std::string json, ToJson(value, options));
  return Value::Str(std::move(json));
}

Result<Value> JoinFilter(Interpreter& interp, const Value& value, const CallArgs& args) {
  COHORT_ASSIGN_OR_RETURN(List items, AsItems(value, "join"));
  Value sep = args.Get(0, "d");
  Value attribute = args.Get(1, "attribute");
  std::string out;
  for (size_t k = 0; k < items.size(); ++k) {
    if (k > 0) out += ToStr(sep);
    Value item = items[k];
    if (attribute.IsString()) {
      COHORT_ASSIGN_OR_RETURN(item, AttributePath(interp, item, attribute.s));
    }
    out += ToStr(item);
    if (out.size() > interp.output_bytes_max()) return OutOfRange("join result too large");
  }
  return Value::Str(std::move(out));
}

Result<Value> ReplaceFilter(const Value& value, const CallArgs& args, size_t size_max) {
  std::string s = ToStr(value);
  Value old_v = args.Get(0, "old");
  Value new_v = args.Get(1, "new");
  Value count_v = args.Get(2, "count");
  if (!old_v.IsString() || !new_v.IsString()) return InvalidArgument("replace expects two strings");
  int64_t count = count_v.kind == Kind::kInt ? count_v.i : -1;
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t found = old_v.s.empty() ? (start <= s.size() ? start : std::string::npos) : s.find(old_v.s, start);
    if (found == std::string::npos) break;
    out.append(s, start, found - start);
    out += new_v.s;
    ++done;
    if (old_v.s.empty()) {
      if (found < s.size()) out += s[found];
      start = found + 1;
    } else {
      start = found + old_v.s.size();
    }
    if (out.size() > size_max) return OutOfRange("replace result too large");
  }
  if (start < s.size()) out.append(s, start, std::string::npos);
  return Value::Str(std::move(out));
}

std::string CaseFilter(std::string s, const std::string& name) {
  bool word_start = true;
  for (size_t k = 0; k < s.size(); ++k) {
    auto c = static_cast<unsigned char>(s[k]);
    if (c >= 0x80) {
      word_start = false;
      continue;
    }
    if (name == "upper") {
      s[k] = static_cast<char>(toupper(c));
    } else if (name == "lower") {
      s[k] = static_cast<char>(tolower(c));
    } else if (name == "capitalize") {
      s[k] = static_cast<char>(k == 0 ? toupper(c) : tolower(c));
    } else {  // title
      s[k] = static_cast<char>(word_start ? toupper(c) : tolower(c));
      word_start = !isalnum(c);
    }
  }
  return s;
}

Result<Value> SortFilter(Interpreter& interp, const Value& value, const CallArgs& args) {
  COHORT_ASSIGN_OR_RETURN(List items, AsItems(value, "sort"));
  bool reverse = Truthy(args.Get(0, "reverse"));
  Value attribute = args.Get(2, "attribute");
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (attribute.IsString()) {
      COHORT_ASSIGN_OR_RETURN(key, AttributePath(interp, item, attribute.s));
    }
    if (!key.IsNumber() && !key.IsString()) return InvalidArgument("sort: items must be numbers or strings");
    keyed.emplace_back(key, item);
  }
  COHORT_RETURN_IF_ERROR(interp.Step(static_cast<int64_t>(keyed.size())));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& a, const auto& b) {
    bool less = (a.first.IsString() && b.first.IsString()) ? a.first.s < b.first.s
                                                            : a.first.AsDouble() < b.first.AsDouble();
    bool greater = (a.first.IsString() && b.first.IsString()) ? b.first.s < a.first.s
                                                               : b.first.AsDouble() < a.first.AsDouble();
    return reverse ? greater : less;
  });
  List out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value::MakeList(std::move(out));
}

Result<Value> DefaultFilter(Interpreter&, const std::string&, const Value& value, const CallArgs& args) {
  bool boolean = Truthy(args.Get(1, "boolean"));
  if (value.IsUndefined() || (boolean && !Truthy(value))) {
    Value fallback = args.Get(0, "default_value");
    return fallback.IsUndefined() ? Value::Str("") : fallback;
  }
  return value;
}

Result<Value> TextFilter(Interpreter& interp, const std::string& name, const Value& value, const CallArgs& args) {
  if (name == "trim") return Value::Str(StripChars(ToStr(value), args.Get(0, "chars"), true, true));
  if (name == "string") return Value::Str(ToStr(value));
  if (name == "safe") return value;
  if (name == "escape" || name == "e") {
    std::string out;
    for (char c : ToStr(value)) {
      out += c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '"' ? "&#34;" : c == '\'' ? "&#39;" : std::string(1, c);
    }
    return Value::Str(std::move(out));
  }
  if (name == "tojson") return ToJsonFilter(value, args);
  if (name == "replace") return ReplaceFilter(value, args, interp.output_bytes_max());
  if (name == "indent") {
    Value width_v = args.Get(0, "width");
    std::string pad = width_v.IsString() ? width_v.s
                                         : std::string(width_v.kind == Kind::kInt ? std::clamp<int64_t>(width_v.i, 0, 256) : 4, ' ');
    bool first = Truthy(args.Get(1, "first"));
    bool blank = Truthy(args.Get(2, "blank"));
    std::string s = ToStr(value);
    std::string out = first ? pad : "";
    for (size_t k = 0; k < s.size(); ++k) {
      out += s[k];
      if (s[k] == '\n' && k + 1 < s.size() && (blank || s[k + 1] != '\n')) out += pad;
      if (out.size() > interp.output_bytes_max()) return OutOfRange("indent result too large");
    }
    return Value::Str(std::move(out));
  }
  return Value::Str(CaseFilter(ToStr(value), name));  // upper, lower, capitalize, title
}

Result<Value> NumberFilter(Interpreter&, const std::string& name, const Value& value, const CallArgs& args) {
  if (name == "abs") {
    if (value.kind == Kind::kInt) return Value::Int(value.i < 0 ? -value.i : value.i);
    if (value.IsNumber()) return Value::Float(std::abs(value.AsDouble()));
    return InvalidArgument("abs expects a number");
  }
  double d = 0;  // int, float
  if (value.IsNumber()) {
    d = value.AsDouble();
  } else if (value.IsString()) {
    char* end = nullptr;
    d = std::strtod(value.s.c_str(), &end);
    if (end == value.s.c_str()) {
      Value fallback = args.Get(0, "default");
      return fallback.IsUndefined() ? (name == "int" ? Value::Int(0) : Value::Float(0)) : fallback;
    }
  }
  if (name == "float") return Value::Float(d);
  if (value.kind == Kind::kInt) return value;
  if (!(std::abs(d) < 9.2e18)) return OutOfRange("int: value out of range");
  return Value::Int(static_cast<int64_t>(d));
}

Result<Value> LengthFilter(Interpreter&, const std::string&, const Value& value, const CallArgs&) {
  if (value.IsString()) return Value::Int(static_cast<int64_t>(Utf8Length(value.s)));
  if (value.IsList()) return Value::Int(static_cast<int64_t>(value.list->size()));
  if (value.IsDict()) return Value::Int(static_cast<int64_t>(value.dict->items.size()));
  if (value.IsUndefined()) return Value::Int(0);
  return InvalidArgument(std::string("object of type '") + KindName(value.kind) + "' has no length");
}

Result<Value> SequenceFilter(Interpreter& interp, const std::string& name, const Value& value, const CallArgs& args) {
  if (name == "join") return JoinFilter(interp, value, args);
  if (name == "map") return MapFilter(interp, value, args);
  if (name == "sort") return SortFilter(interp, value, args);
  if (name == "selectattr" || name == "rejectattr") {
    return SelectFilter(interp, value, args, true, name == "selectattr", name);
  }
  if (name == "select" || name == "reject") return SelectFilter(interp, value, args, false, name == "select", name);
  COHORT_ASSIGN_OR_RETURN(List items, AsItems(value, name));
  if (name == "first" || name == "last") {
    if (items.empty()) return Value::Undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    if (value.IsString()) {
      std::string s;
      for (const Value& c : items) s += c.s;
      return Value::Str(std::move(s));
    }
  }
  if (name == "unique") {
    List out;
    for (const Value& item : items) {
      COHORT_RETURN_IF_ERROR(interp.Step(static_cast<int64_t>(out.size()) + 1));
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return Equal(o, item); })) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }
  return Value::MakeList(std::move(items));  // list, reverse
}

Result<Value> ItemsFilter(Interpreter&, const std::string& name, const Value& value, const CallArgs&) {
  if (value.IsUndefined()) return Value::MakeList();
  if (!value.IsDict()) return InvalidArgument("filter '" + name + "' expects a mapping, got a " + KindName(value.kind));
  List out;
  for (const auto& [k, v] : value.dict->items) out.push_back(Value::MakeList({value.dict->KeyValue(k), v}));
  if (name == "dictsort") {
    std::stable_sort(out.begin(), out.end(), [](const Value& a, const Value& b) {
      return ToStr((*a.list)[0]) < ToStr((*b.list)[0]);
    });
  }
  return Value::MakeList(std::move(out));
}

using FilterFn = Result<Value> (*)(Interpreter&, const std::string&, const Value&, const CallArgs&);

const std::map<std::string, FilterFn>& FilterTable() {
  static const std::map<std::string, FilterFn> kTable = {
      {"default", DefaultFilter}, {"d", DefaultFilter},          {"trim", TextFilter},
      {"string", TextFilter},     {"safe", TextFilter},           {"escape", TextFilter},
      {"e", TextFilter},          {"tojson", TextFilter},         {"replace", TextFilter},
      {"indent", TextFilter},     {"upper", TextFilter},          {"lower", TextFilter},
      {"capitalize", TextFilter}, {"title", TextFilter},          {"abs", NumberFilter},
      {"int", NumberFilter},      {"float", NumberFilter},        {"length", LengthFilter},
      {"count", LengthFilter},    {"join", SequenceFilter},       {"map", SequenceFilter},
      {"sort", SequenceFilter},   {"selectattr", SequenceFilter}, {"rejectattr", SequenceFilter},
      {"select", SequenceFilter}, {"reject", SequenceFilter},     {"first", SequenceFilter},
      {"last", SequenceFilter},   {"list", SequenceFilter},       {"reverse", SequenceFilter},
      {"unique", SequenceFilter}, {"items", ItemsFilter},         {"dictsort", ItemsFilter},
  };
  return kTable;
}

}  // namespace

Result<Value> ApplyFilter(Interpreter& interp, const std::string& name, const Value& value, const CallArgs& args) {
  COHORT_RETURN_IF_ERROR(interp.Step());
  auto it = FilterTable().find(name);
  if (it == FilterTable().end()) return Unsupported("unsupported filter '" + name + "'");
  return it->second(interp, name, value, args);
}

Result<bool> ApplyTest(const std::string& name, const Value& v, const CallArgs& args) {
  Value other = args.Get(0, "other");
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "none") return v.IsNone();
  if (name == "boolean") return v.kind == Kind::kBool;
  if (name == "true") return v.kind == Kind::kBool && v.b;
  if (name == "false") return v.kind == Kind::kBool && !v.b;
  if (name == "integer") return v.kind == Kind::kInt;
  if (name == "float") return v.kind == Kind::kFloat;
  if (name == "number") return v.IsNumber();
  if (name == "string") return v.IsString();
  if (name == "mapping") return v.IsDict();
  if (name == "iterable") return v.IsString() || v.IsList() || v.IsDict() || v.IsUndefined();
  if (name == "sequence") return v.IsString() || v.IsList() || v.IsDict();
  if (name == "callable") return v.IsCallable();
  if (name == "lower" || name == "upper") {
    return v.IsString() && CaseFilter(v.s, name) == v.s;
  }
  if (name == "equalto" || name == "eq" || name == "==" || name == "sameas") return Equal(v, other);
  if (name == "ne" || name == "!=") return !Equal(v, other);
  if (name == "in") return Contains(other, v);
  if (name == "lt" || name == "le" || name == "gt" || name == "ge") {
    if (!(v.IsNumber() && other.IsNumber()) && !(v.IsString() && other.IsString())) {
      return InvalidArgument("test '" + name + "' needs two numbers or two strings");
    }
    int cmp = v.IsString() ? v.s.compare(other.s) : (v.AsDouble() < other.AsDouble() ? -1 : v.AsDouble() > other.AsDouble() ? 1 : 0);
    return name == "lt" ? cmp < 0 : name == "le" ? cmp <= 0 : name == "gt" ? cmp > 0 : cmp >= 0;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != Kind::kInt) return InvalidArgument("test '" + name + "' expects an integer");
    if (name == "divisibleby") {
      if (other.kind != Kind::kInt || other.i == 0) return InvalidArgument("divisibleby expects a non-zero integer");
      return v.i % other.i == 0;
    }
    return (v.i % 2 != 0) == (name == "odd");
  }
  return Unsupported("unsupported test 'is " + name + "'");
}

// Chat templates count messages, not millions; a longer range is a runaway template.
constexpr size_t kMaxRangeLength = 1u << 17;

void AddGlobalFunctions(Interpreter& interp, int64_t now_unix_s) {
  Interpreter* in = &interp;
  interp.SetGlobal("range", Value::Function([in](const CallArgs& a) -> Result<Value> {
    int64_t start = 0;
    int64_t stop = 0;
    int64_t step = 1;
    for (const Value& p : a.positional) {
      if (p.kind != Kind::kInt) return InvalidArgument("range expects integers");
    }
    if (a.positional.size() == 1) {
      stop = a.positional[0].i;
    } else if (a.positional.size() == 2 || a.positional.size() == 3) {
      start = a.positional[0].i;
      stop = a.positional[1].i;
      if (a.positional.size() == 3) step = a.positional[2].i;
    } else {
      return InvalidArgument("range expects 1 to 3 arguments");
    }
    if (step == 0) return InvalidArgument("range step must not be zero");
    List out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (out.size() >= kMaxRangeLength) return OutOfRange("range() longer than " + std::to_string(kMaxRangeLength));
      COHORT_RETURN_IF_ERROR(in->Step());
      out.push_back(Value::Int(k));
    }
    return Value::MakeList(std::move(out));
  }));
  auto make_dict = [](const CallArgs& a) -> Result<Value> {
    Value ns = Value::MakeDict();
    if (!a.positional.empty() && a.positional[0].IsDict()) ns.dict->items = a.positional[0].dict->items;
    for (const auto& [k, v] : a.keyword) ns.dict->Set(k, v);
    return ns;
  };
  interp.SetGlobal("namespace", Value::Function(make_dict));
  interp.SetGlobal("dict", Value::Function(make_dict));
  interp.SetGlobal("raise_exception", Value::Function([](const CallArgs& a) -> Result<Value> {
    return InvalidArgument("chat template raised an exception: " + ToStr(a.Get(0, "message")));
  }));
  interp.SetGlobal("strftime_now", Value::Function([now_unix_s](const CallArgs& a) -> Result<Value> {
    Value format = a.Get(0, "format");
    if (!format.IsString()) return InvalidArgument("strftime_now expects a format string");
    std::time_t t = static_cast<std::time_t>(now_unix_s);
    std::tm local{};
    localtime_r(&t, &local);
    char buf[256];
    size_t n = std::strftime(buf, sizeof(buf), format.s.c_str(), &local);
    if (n == 0 && !format.s.empty()) return InvalidArgument("strftime_now: cannot format '" + format.s + "'");
    return Value::Str(std::string(buf, n));
  }));
}

}  // namespace cohort::tokenizer::jinja
