// Python semantics of Jinja values: truthiness, equality, str()/repr() and json.dumps.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace cohort::tokenizer::jinja {

Value Value::MakeList(List items) {
  Value v = Make(Kind::kList);
  v.list = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::MakeDict() {
  Value v = Make(Kind::kDict);
  v.dict = std::make_shared<Dict>();
  return v;
}

Value Value::Function(Callable fn) {
  Value v = Make(Kind::kCallable);
  v.fn = std::make_shared<Callable>(std::move(fn));
  return v;
}

const Value* Dict::Find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::Find(const std::string& key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(const std::string& key, Value value) {
  if (Value* existing = Find(key)) {
    *existing = std::move(value);
    return;
  }
  items.emplace_back(key, std::move(value));
}

void Dict::SetTyped(const Value& key, Value value) {
  if (key.IsString()) {
    Set(key.s, std::move(value));
    return;
  }
  std::string text = ToStr(key);
  bool known = false;
  for (const auto& [k, v] : typed_keys) known = known || k == text;
  if (!known) typed_keys.emplace_back(text, key);
  Set(text, std::move(value));
}

Value Dict::KeyValue(const std::string& key) const {
  for (const auto& [k, v] : typed_keys) {
    if (k == key) return v;
  }
  return Value::Str(key);
}

bool Dict::Erase(const std::string& key) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it->first == key) {
      items.erase(it);
      return true;
    }
  }
  return false;
}

Value CallArgs::Get(size_t index, const std::string& name) const {
  if (index < positional.size()) return positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return v;
  }
  return Value::Undefined(name);
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kCallable: return "callable";
  }
  return "?";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return v.b;
    case Kind::kInt: return v.i != 0;
    case Kind::kFloat: return v.f != 0.0;
    case Kind::kString: return !v.s.empty();
    case Kind::kList: return !v.list->empty();
    case Kind::kDict: return !v.dict->items.empty();
    case Kind::kCallable: return true;
  }
  return false;
}

namespace {

// Containers can nest (or, through namespaces, refer to themselves); comparisons and printing
// stop at this depth instead of recursing without bound.
constexpr int kMaxValueDepth = 100;

bool EqualAt(const Value& a, const Value& b, int depth) {
  if (depth > kMaxValueDepth) return false;
  if (a.IsNumber() && b.IsNumber()) {
    if (a.kind == Kind::kFloat || b.kind == Kind::kFloat) return a.AsDouble() == b.AsDouble();
    int64_t x = a.kind == Kind::kBool ? a.b : a.i;
    int64_t y = b.kind == Kind::kBool ? b.b : b.i;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return a.s == b.s;
    case Kind::kList: {
      if (a.list == b.list) return true;  // identity first, as Python's containers do
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k) {
        if (!EqualAt((*a.list)[k], (*b.list)[k], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (a.dict == b.dict) return true;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, value] : a.dict->items) {
        const Value* other = b.dict->Find(key);
        if (other == nullptr || !EqualAt(value, *other, depth + 1)) return false;
      }
      return true;
    }
    case Kind::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

}  // namespace

bool Equal(const Value& a, const Value& b) { return EqualAt(a, b, 0); }

std::string FloatRepr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out the way Python's repr does:
  // positional for exponents in [-4, 16), scientific otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  int exponent = std::atoi(sci.c_str() + e_pos + 1);
  bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0.";
      out.append(static_cast<size_t>(-exponent - 1), '0');
      out += digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits;
      out.append(static_cast<size_t>(exponent) + 1 - digits.size(), '0');
      out += ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exponent) + 1);
      out += '.';
      out.append(digits, static_cast<size_t>(exponent) + 1, std::string::npos);
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  }
  if (negative) out.insert(out.begin(), '-');
  return out;
}

namespace {

std::string StrRepr(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<unsigned char>(quote)) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

namespace {

std::string StrAt(const Value& v, int depth);

std::string ReprAt(const Value& v, int depth) {
  if (v.kind == Kind::kString) return StrRepr(v.s);
  return StrAt(v, depth);
}

std::string StrAt(const Value& v, int depth) {
  switch (v.kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return v.b ? "True" : "False";
    case Kind::kInt: return std::to_string(v.i);
    case Kind::kFloat: return FloatRepr(v.f);
    case Kind::kString: return v.s;
    case Kind::kList: {
      if (depth > kMaxValueDepth) return "[...]";
      std::string out = "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) out += ", ";
        out += ReprAt((*v.list)[k], depth + 1);
      }
      return out + "]";
    }
    case Kind::kDict: {
      if (depth > kMaxValueDepth) return "{...}";
      std::string out = "{";
      bool first = true;
      for (const auto& [key, value] : v.dict->items) {
        if (!first) out += ", ";
        first = false;
        out += ReprAt(v.dict->KeyValue(key), depth + 1) + ": " + ReprAt(value, depth + 1);
      }
      return out + "}";
    }
    case Kind::kCallable: return "<function>";
  }
  return "";
}

bool WouldCycleAt(const Value& v, const void* container, int depth) {
  if (v.IsList()) {
    if (v.list.get() == container || depth > kMaxValueDepth) return true;
    for (const Value& item : *v.list) {
      if (WouldCycleAt(item, container, depth + 1)) return true;
    }
  } else if (v.IsDict()) {
    if (v.dict.get() == container || depth > kMaxValueDepth) return true;
    for (const auto& [key, item] : v.dict->items) {
      if (WouldCycleAt(item, container, depth + 1)) return true;
    }
  }
  return false;
}

}  // namespace

bool WouldCycle(const Value& v, const void* container) { return WouldCycleAt(v, container, 0); }

std::string Repr(const Value& v) { return ReprAt(v, 0); }
std::string ToStr(const Value& v) { return StrAt(v, 0); }

namespace {

// Decodes one UTF-8 code point at s[pos]; invalid bytes decode as themselves (one byte).
uint32_t DecodeUtf8(const std::string& s, size_t pos, size_t* len) {
  auto c = static_cast<unsigned char>(s[pos]);
  int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 1;
  if (pos + static_cast<size_t>(n) > s.size()) n = 1;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1f) : n == 3 ? (c & 0x0f) : (c & 0x07);
  for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3f);
  *len = static_cast<size_t>(n);
  return cp;
}

void JsonEscape(const std::string& s, bool ensure_ascii, std::string* out) {
  *out += '"';
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 1;
    uint32_t cp = DecodeUtf8(s, pos, &len);
    char buf[16];
    switch (cp) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (cp < 0x20 || (ensure_ascii && cp >= 0x7f)) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
          } else {
            std::snprintf(buf, sizeof(buf), "\\u%04x", cp);
          }
          *out += buf;
        } else {
          out->append(s, pos, len);
        }
    }
    pos += len;
  }
  *out += '"';
}

Status DumpJson(const Value& v, const JsonOptions& opt, int depth, std::string* out) {
  if (depth > 128) return OutOfRange("tojson: value nested too deeply");
  auto newline = [&](int level) {
    if (opt.indent < 0) return;
    *out += '\n';
    out->append(static_cast<size_t>(opt.indent * level), ' ');
  };
  switch (v.kind) {
    case Kind::kNone: *out += "null"; return Status::Ok();
    case Kind::kBool: *out += v.b ? "true" : "false"; return Status::Ok();
    case Kind::kInt: *out += std::to_string(v.i); return Status::Ok();
    case Kind::kFloat:
      *out += std::isnan(v.f) ? "NaN" : std::isinf(v.f) ? (v.f > 0 ? "Infinity" : "-Infinity") : FloatRepr(v.f);
      return Status::Ok();
    case Kind::kString: JsonEscape(v.s, opt.ensure_ascii, out); return Status::Ok();
    case Kind::kList: {
      if (v.list->empty()) {
        *out += "[]";
        return Status::Ok();
      }
      *out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k > 0) *out += opt.item_separator;
        newline(depth + 1);
        COHORT_RETURN_IF_ERROR(DumpJson((*v.list)[k], opt, depth + 1, out));
      }
      newline(depth);
      *out += ']';
      return Status::Ok();
    }
    case Kind::kDict: {
      if (v.dict->items.empty()) {
        *out += "{}";
        return Status::Ok();
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& item : v.dict->items) entries.push_back(&item);
      if (opt.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      *out += '{';
      for (size_t k = 0; k < entries.size(); ++k) {
        if (k > 0) *out += opt.item_separator;
        newline(depth + 1);
        JsonEscape(entries[k]->first, opt.ensure_ascii, out);
        *out += opt.key_separator;
        COHORT_RETURN_IF_ERROR(DumpJson(entries[k]->second, opt, depth + 1, out));
      }
      newline(depth);
      *out += '}';
      return Status::Ok();
    }
    case Kind::kUndefined:
      return InvalidArgument("tojson: value '" + v.s + "' is undefined");
    case Kind::kCallable:
      return InvalidArgument("tojson: a function is not JSON serializable");
  }
  return Internal("tojson: unknown kind");
}

}  // namespace

Result<std::string> ToJson(const Value& v, const JsonOptions& options) {
  std::string out;
  COHORT_RETURN_IF_ERROR(DumpJson(v, options, 0, &out));
  return out;
}

size_t Utf8Length(const std::string& s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); ++n) {
    size_t len = 1;
    DecodeUtf8(s, pos, &len);
    pos += len;
  }
  return n;
}

std::vector<size_t> Utf8Offsets(const std::string& s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t pos = 0; pos < s.size();) {
    offsets.push_back(pos);
    size_t len = 1;
    DecodeUtf8(s, pos, &len);
    pos += len;
  }
  offsets.push_back(s.size());
  return offsets;
}

}  // namespace cohort::tokenizer::jinja
