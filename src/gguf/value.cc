// GGUF metadata values: type names, constructors and a short human-readable rendering.
#include "gguf/value.h"

#include <cstdio>
#include <string>

#include "core/check.h"

namespace cohort::gguf {

std::string_view ValueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8: return "u8";
    case ValueType::kInt8: return "i8";
    case ValueType::kUint16: return "u16";
    case ValueType::kInt16: return "i16";
    case ValueType::kUint32: return "u32";
    case ValueType::kInt32: return "i32";
    case ValueType::kFloat32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "u64";
    case ValueType::kInt64: return "i64";
    case ValueType::kFloat64: return "f64";
  }
  return "unknown";
}

bool IsKnownValueType(uint32_t id) { return id <= static_cast<uint32_t>(ValueType::kFloat64); }

bool IsSignedType(ValueType type) {
  return type == ValueType::kInt8 || type == ValueType::kInt16 || type == ValueType::kInt32 ||
         type == ValueType::kInt64;
}

bool IsUnsignedType(ValueType type) {
  return type == ValueType::kUint8 || type == ValueType::kUint16 ||
         type == ValueType::kUint32 || type == ValueType::kUint64;
}

int ScalarSize(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool: return 1;
    case ValueType::kUint16:
    case ValueType::kInt16: return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32: return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64: return 8;
    case ValueType::kString:
    case ValueType::kArray: return 0;
  }
  return 0;
}

bool Value::is_integer() const { return IsSignedType(type) || IsUnsignedType(type); }

bool Value::is_float() const { return type == ValueType::kFloat32 || type == ValueType::kFloat64; }

const Array* Value::array() const { return std::get_if<Array>(&data); }

std::string Value::ToString(size_t max_items) const {
  switch (type) {
    case ValueType::kBool: return std::get<bool>(data) ? "true" : "false";
    case ValueType::kFloat32:
    case ValueType::kFloat64: {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.9g", std::get<double>(data));
      return buf;
    }
    case ValueType::kString: {
      // Built by appends: GCC 12 warns falsely (-Wrestrict) on `"\"" + s + "\""`.
      const std::string& s = std::get<std::string>(data);
      std::string out = "\"";
      out.append(s, 0, s.size() <= 64 ? s.size() : 61);
      if (s.size() <= 64) return out.append("\"");
      return out.append("...\" (").append(std::to_string(s.size())).append(" bytes)");
    }
    case ValueType::kArray: {
      const Array& a = std::get<Array>(data);
      if (a.items.size() > max_items) {
        std::string out = "[";
        out.append(std::to_string(a.items.size())).append(" ");
        return out.append(ValueTypeName(a.element_type)).append("s]");
      }
      std::string out = "[";
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (i > 0) out += ", ";
        out += a.items[i].ToString(max_items);
      }
      return out.append("]");
    }
    default:
      if (IsSignedType(type)) return std::to_string(std::get<int64_t>(data));
      return std::to_string(std::get<uint64_t>(data));
  }
}

Value Value::Int(ValueType type, int64_t v) {
  COHORT_CHECK(IsSignedType(type));
  return Value{type, v};
}

Value Value::Uint(ValueType type, uint64_t v) {
  COHORT_CHECK(IsUnsignedType(type));
  return Value{type, v};
}

Value Value::Float(ValueType type, double v) {
  COHORT_CHECK(type == ValueType::kFloat32 || type == ValueType::kFloat64);
  return Value{type, v};
}

Value Value::Bool(bool v) { return Value{ValueType::kBool, v}; }

Value Value::String(std::string v) { return Value{ValueType::kString, std::move(v)}; }

Value Value::ArrayOf(ValueType element_type, std::vector<Value> items) {
  for (const Value& item : items) COHORT_CHECK(item.type == element_type);
  return Value{ValueType::kArray, Array{element_type, std::move(items)}};
}

}  // namespace cohort::gguf
