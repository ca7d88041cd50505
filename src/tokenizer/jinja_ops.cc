// Operators, subscripts, slices and attribute access with Python semantics.
#include <cmath>
#include <string>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_interpreter.h"

namespace cohort::tokenizer::jinja {
namespace {

Status TypeError(const std::string& op, const Value& a, const Value& b) {
  return InvalidArgument("unsupported operand types for " + op + ": '" + KindName(a.kind) + "' and '" +
                         KindName(b.kind) + "'");
}

int64_t AsInt(const Value& v) { return v.kind == Kind::kBool ? v.b : v.i; }
bool IsIntLike(const Value& v) { return v.kind == Kind::kInt || v.kind == Kind::kBool; }

Result<Value> IntArith(const std::string& op, int64_t x, int64_t y) {
  int64_t r = 0;
  bool overflow = false;
  if (op == "+") {
    overflow = __builtin_add_overflow(x, y, &r);
  } else if (op == "-") {
    overflow = __builtin_sub_overflow(x, y, &r);
  } else if (op == "*") {
    overflow = __builtin_mul_overflow(x, y, &r);
  } else if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgument("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return OutOfRange("integer overflow in " + op);
    int64_t q = x / y;
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {  // Python floors toward negative infinity
      q -= 1;
      m += y;
    }
    r = op == "//" ? q : m;
  } else if (op == "**") {
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    r = 1;
    for (int64_t k = 0; k < y && !overflow; ++k) overflow = __builtin_mul_overflow(r, x, &r);
  }
  if (overflow) return OutOfRange("integer overflow in " + op);
  return Value::Int(r);
}

Result<Value> FloatArith(const std::string& op, double x, double y) {
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "**") return Value::Float(std::pow(x, y));
  if (y == 0.0) return InvalidArgument("float division by zero");
  if (op == "/") return Value::Float(x / y);
  if (op == "//") return Value::Float(std::floor(x / y));
  double m = std::fmod(x, y);
  if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
  return Value::Float(m);
}

Result<Value> Repeat(Interpreter& interp, const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  size_t unit = seq.IsString() ? seq.s.size() : seq.list->size() * 16;
  if (unit != 0 && static_cast<uint64_t>(times) > interp.output_bytes_max() / unit) {
    return OutOfRange("sequence repetition result too large");
  }
  COHORT_RETURN_IF_ERROR(interp.Step(times));
  if (seq.IsString()) {
    std::string out;
    for (int64_t k = 0; k < times; ++k) out += seq.s;
    return Value::Str(std::move(out));
  }
  List out;
  for (int64_t k = 0; k < times; ++k) out.insert(out.end(), seq.list->begin(), seq.list->end());
  return Value::MakeList(std::move(out));
}

Result<Value> Compare(const std::string& op, const Value& a, const Value& b) {
  int cmp = 0;
  if (a.IsNumber() && b.IsNumber()) {
    double x = a.AsDouble();
    double y = b.AsDouble();
    if (IsIntLike(a) && IsIntLike(b)) {
      cmp = AsInt(a) < AsInt(b) ? -1 : AsInt(a) > AsInt(b) ? 1 : 0;
    } else {
      cmp = x < y ? -1 : x > y ? 1 : 0;
    }
  } else if (a.IsString() && b.IsString()) {
    cmp = a.s.compare(b.s);
  } else {
    return TypeError(op, a, b);
  }
  bool r = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
  return Value::Bool(r);
}

}  // namespace

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Kind::kString:
      if (!item.IsString()) return InvalidArgument("'in <string>' requires a string on the left");
      return container.s.find(item.s) != std::string::npos;
    case Kind::kList:
      for (const Value& v : *container.list) {
        if (Equal(v, item)) return true;
      }
      return false;
    case Kind::kDict: return item.IsString() && container.dict->Find(item.s) != nullptr;
    case Kind::kUndefined: return false;
    default: return InvalidArgument(std::string("argument of type '") + KindName(container.kind) + "' is not iterable");
  }
}

Result<Value> BinaryOp(Interpreter& interp, const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Value::Bool(Equal(a, b));
  if (op == "!=") return Value::Bool(!Equal(a, b));
  if (op == "in" || op == "not in") {
    COHORT_ASSIGN_OR_RETURN(bool found, Contains(b, a));
    return Value::Bool(found == (op == "in"));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") return Compare(op, a, b);
  if (op == "~") {
    std::string joined = ToStr(a) + ToStr(b);
    if (joined.size() > interp.output_bytes_max()) return OutOfRange("string too large");
    return Value::Str(std::move(joined));
  }
  if (a.IsNumber() && b.IsNumber()) {
    if (op == "/") return FloatArith(op, a.AsDouble(), b.AsDouble());
    if (IsIntLike(a) && IsIntLike(b)) return IntArith(op, AsInt(a), AsInt(b));
    return FloatArith(op, a.AsDouble(), b.AsDouble());
  }
  if (op == "+" && a.IsString() && b.IsString()) {
    if (a.s.size() + b.s.size() > interp.output_bytes_max()) return OutOfRange("string too large");
    return Value::Str(a.s + b.s);
  }
  if (op == "+" && a.IsList() && b.IsList()) {
    List joined = *a.list;
    joined.insert(joined.end(), b.list->begin(), b.list->end());
    return Value::MakeList(std::move(joined));
  }
  if (op == "*" && (a.IsString() || a.IsList()) && IsIntLike(b)) return Repeat(interp, a, AsInt(b));
  if (op == "*" && (b.IsString() || b.IsList()) && IsIntLike(a)) return Repeat(interp, b, AsInt(a));
  if (op == "%" && a.IsString()) return Unsupported("printf-style string formatting ('%') is not supported");
  if (a.IsUndefined() || b.IsUndefined()) {
    const Value& u = a.IsUndefined() ? a : b;
    return InvalidArgument("'" + u.s + "' is undefined (used with operator " + op + ")");
  }
  return TypeError(op, a, b);
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  switch (obj.kind) {
    case Kind::kDict: {
      if (!key.IsString() && !key.IsNumber()) return Value::Undefined();
      std::string name = ToStr(key);
      const Value* found = obj.dict->Find(name);
      return found ? *found : Value::Undefined(name);
    }
    case Kind::kList:
    case Kind::kString: {
      if (!IsIntLike(key)) {
        if (obj.IsString() && key.IsString()) return Value::Undefined(key.s);
        return InvalidArgument(std::string(KindName(obj.kind)) + " indices must be integers, not " + KindName(key.kind));
      }
      std::vector<size_t> offsets;
      if (obj.IsString()) offsets = Utf8Offsets(obj.s);
      auto n = static_cast<int64_t>(obj.IsList() ? obj.list->size() : offsets.size() - 1);
      int64_t k = AsInt(key);
      if (k < 0) k += n;
      if (k < 0 || k >= n) return Value::Undefined();
      if (obj.IsList()) return (*obj.list)[static_cast<size_t>(k)];
      return Value::Str(obj.s.substr(offsets[k], offsets[k + 1] - offsets[k]));
    }
    case Kind::kUndefined:
      return InvalidArgument("cannot index undefined value" + (obj.s.empty() ? "" : " '" + obj.s + "'"));
    default: return Value::Undefined();
  }
}

Result<Value> Slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (!obj.IsList() && !obj.IsString()) {
    return InvalidArgument(std::string("cannot slice a ") + KindName(obj.kind));
  }
  auto bad = [](const Value& v) { return !v.IsUndefined() && !v.IsNone() && !IsIntLike(v); };
  if (bad(start_v) || bad(stop_v) || bad(step_v)) return InvalidArgument("slice indices must be integers");
  std::vector<size_t> offsets;
  if (obj.IsString()) offsets = Utf8Offsets(obj.s);
  const auto n = static_cast<int64_t>(obj.IsList() ? obj.list->size() : offsets.size() - 1);
  auto given = [](const Value& v) { return IsIntLike(v); };
  int64_t step = given(step_v) ? AsInt(step_v) : 1;
  if (step == 0) return InvalidArgument("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  auto adjust = [&](const Value& v, int64_t fallback) {
    if (!given(v)) return fallback;
    int64_t k = AsInt(v);
    if (k < 0) {
      k += n;
      if (k < 0) k = step < 0 ? -1 : 0;
    } else if (k >= n) {
      k = step < 0 ? n - 1 : n;
    }
    return k;
  };
  int64_t start = adjust(start_v, step < 0 ? n - 1 : 0);
  int64_t stop = adjust(stop_v, step < 0 ? -1 : n);
  List items;
  std::string text;
  for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (obj.IsList()) {
      items.push_back((*obj.list)[static_cast<size_t>(k)]);
    } else {
      text.append(obj.s, offsets[k], offsets[k + 1] - offsets[k]);
    }
  }
  if (obj.IsList()) return Value::MakeList(std::move(items));
  return Value::Str(std::move(text));
}

std::string StripChars(const std::string& s, const Value& chars, bool left, bool right) {
  std::string set = chars.IsString() ? chars.s : std::string(" \t\n\r\f\v");
  size_t begin = 0;
  size_t end = s.size();
  if (left) {
    while (begin < end && set.find(s[begin]) != std::string::npos) ++begin;
  }
  if (right) {
    while (end > begin && set.find(s[end - 1]) != std::string::npos) --end;
  }
  return s.substr(begin, end - begin);
}

}  // namespace cohort::tokenizer::jinja
