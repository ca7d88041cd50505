// A GGUF metadata value: a scalar, a string, or an array of values (arrays may nest).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace cohort::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view ValueTypeName(ValueType type);  // "u32", "string", ...; "unknown" otherwise
bool IsKnownValueType(uint32_t id);
bool IsSignedType(ValueType type);    // i8/i16/i32/i64: held as int64_t
bool IsUnsignedType(ValueType type);  // u8/u16/u32/u64: held as uint64_t
int ScalarSize(ValueType type);       // bytes on disk of a fixed-size type; 0 for string/array

struct Value;
struct Array {
  ValueType element_type = ValueType::kUint8;
  std::vector<Value> items;
  bool operator==(const Array&) const = default;
};

struct Value {
  ValueType type = ValueType::kUint8;
  // Integers are held widened (signed in int64, unsigned in uint64); floats in double.
  std::variant<int64_t, uint64_t, double, bool, std::string, Array> data;

  bool is_integer() const;
  bool is_float() const;
  const Array* array() const;  // nullptr unless type == kArray
  // Short human-readable rendering; long arrays are elided ("[512 strings]").
  std::string ToString(size_t max_items = 8) const;

  static Value Int(ValueType type, int64_t v);
  static Value Uint(ValueType type, uint64_t v);
  static Value Float(ValueType type, double v);
  static Value Bool(bool v);
  static Value String(std::string v);
  static Value ArrayOf(ValueType element_type, std::vector<Value> items);

  // Deep equality (type and data; NaN is unequal to itself, as for double).
  bool operator==(const Value&) const = default;
};

struct KeyValue {
  std::string key;
  Value value;
  bool operator==(const KeyValue&) const = default;
};

}  // namespace cohort::gguf
