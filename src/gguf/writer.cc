// Serialises metadata and tensors as GGUF: header, key/values, tensor infos, then the tensor
// data, each tensor starting on the alignment.
#include "gguf/writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gguf/gguf.h"

namespace cohort::gguf {
namespace {

uint64_t AlignUp(uint64_t n, uint64_t alignment) { return (n + alignment - 1) / alignment * alignment; }

template <typename T>
void Append(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  std::memcpy(out->data() + at, &v, sizeof(T));
}

void AppendString(std::vector<uint8_t>* out, std::string_view s) {
  Append<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void AppendValue(std::vector<uint8_t>* out, const Value& v) {
  switch (v.type) {
    case ValueType::kUint8: Append(out, static_cast<uint8_t>(std::get<uint64_t>(v.data))); return;
    case ValueType::kUint16: Append(out, static_cast<uint16_t>(std::get<uint64_t>(v.data))); return;
    case ValueType::kUint32: Append(out, static_cast<uint32_t>(std::get<uint64_t>(v.data))); return;
    case ValueType::kUint64: Append(out, std::get<uint64_t>(v.data)); return;
    case ValueType::kInt8: Append(out, static_cast<int8_t>(std::get<int64_t>(v.data))); return;
    case ValueType::kInt16: Append(out, static_cast<int16_t>(std::get<int64_t>(v.data))); return;
    case ValueType::kInt32: Append(out, static_cast<int32_t>(std::get<int64_t>(v.data))); return;
    case ValueType::kInt64: Append(out, std::get<int64_t>(v.data)); return;
    case ValueType::kFloat32: Append(out, static_cast<float>(std::get<double>(v.data))); return;
    case ValueType::kFloat64: Append(out, std::get<double>(v.data)); return;
    case ValueType::kBool: Append<uint8_t>(out, std::get<bool>(v.data) ? 1 : 0); return;
    case ValueType::kString: AppendString(out, std::get<std::string>(v.data)); return;
    case ValueType::kArray: {
      const Array& a = std::get<Array>(v.data);
      Append(out, static_cast<uint32_t>(a.element_type));
      Append<uint64_t>(out, a.items.size());
      for (const Value& item : a.items) {
        COHORT_CHECK(item.type == a.element_type);
        AppendValue(out, item);
      }
      return;
    }
  }
  COHORT_CHECK(false && "unknown value type");
}

// Checks that a Value's variant holds what its type says, so AppendValue cannot throw.
bool WellFormed(const Value& v) {
  if (IsSignedType(v.type)) return std::holds_alternative<int64_t>(v.data);
  if (IsUnsignedType(v.type)) return std::holds_alternative<uint64_t>(v.data);
  if (v.is_float()) return std::holds_alternative<double>(v.data);
  if (v.type == ValueType::kBool) return std::holds_alternative<bool>(v.data);
  if (v.type == ValueType::kString) return std::holds_alternative<std::string>(v.data);
  const Array* a = v.array();
  if (v.type != ValueType::kArray || a == nullptr) return false;
  for (const Value& item : a->items) {
    if (item.type != a->element_type || !WellFormed(item)) return false;
  }
  return true;
}

}  // namespace

Writer::Writer(uint32_t version, uint64_t alignment) : version_(version), alignment_(alignment) {
  COHORT_CHECK(version == 2 || version == 3);
  COHORT_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  COHORT_CHECK_LE(alignment, uint64_t{UINT32_MAX});
  if (alignment != kDefaultAlignment) {
    SetUint32("general.alignment", static_cast<uint32_t>(alignment));
  }
}

void Writer::Set(std::string key, Value value) {
  COHORT_CHECK(WellFormed(value));
  if (key == "general.alignment") {
    // The data layout follows alignment_; a different value here would produce a lying file.
    COHORT_CHECK(value.type == ValueType::kUint32);
    COHORT_CHECK_EQ(std::get<uint64_t>(value.data), alignment_);
  }
  for (KeyValue& kv : kv_) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  kv_.push_back({std::move(key), std::move(value)});
}

void Writer::SetString(std::string key, std::string v) { Set(std::move(key), Value::String(std::move(v))); }
void Writer::SetUint32(std::string key, uint32_t v) { Set(std::move(key), Value::Uint(ValueType::kUint32, v)); }
void Writer::SetInt32(std::string key, int32_t v) { Set(std::move(key), Value::Int(ValueType::kInt32, v)); }
void Writer::SetFloat32(std::string key, float v) { Set(std::move(key), Value::Float(ValueType::kFloat32, v)); }
void Writer::SetBool(std::string key, bool v) { Set(std::move(key), Value::Bool(v)); }

void Writer::SetStringArray(std::string key, const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const std::string& s : v) items.push_back(Value::String(s));
  Set(std::move(key), Value::ArrayOf(ValueType::kString, std::move(items)));
}

uint64_t Writer::TensorBytes(DType type, const std::vector<int64_t>& ne) {
  COHORT_CHECK_LE(ne.size(), size_t{kMaxDims});
  const DTypeTraits& traits = Traits(type);
  const int64_t ne0 = ne.empty() ? 1 : ne[0];
  COHORT_CHECK_EQ(ne0 % traits.block_size, 0);
  bool empty = false;
  for (int64_t d : ne) {
    COHORT_CHECK_GE(d, 0);
    empty = empty || d == 0;
  }
  // An empty tensor has no bytes however large its other dimensions (found by the fuzzer:
  // a partial product could overflow before reaching the zero).
  if (empty) return 0;
  uint64_t n = static_cast<uint64_t>(ne0 / traits.block_size * traits.type_size);
  for (size_t d = 1; d < ne.size(); ++d) {
    COHORT_CHECK(!__builtin_mul_overflow(n, static_cast<uint64_t>(ne[d]), &n));
  }
  return n;
}

void Writer::AddTensorInfo(std::string name, DType type, std::vector<int64_t> ne) {
  COHORT_CHECK(!name.empty());
  for (const Tensor& t : tensors_) COHORT_CHECK(t.name != name);
  Tensor t;
  t.n_bytes = TensorBytes(type, ne);
  t.name = std::move(name);
  t.type = type;
  t.ne = std::move(ne);
  tensors_.push_back(std::move(t));
}

void Writer::AddTensor(std::string name, DType type, std::vector<int64_t> ne,
                       std::vector<uint8_t> data) {
  AddTensorInfo(std::move(name), type, std::move(ne));
  COHORT_CHECK_EQ(data.size(), tensors_.back().n_bytes);
  tensors_.back().data = std::move(data);
}

void Writer::AddStreamedTensor(std::string name, DType type, std::vector<int64_t> ne,
                               FillFn fill) {
  COHORT_CHECK(fill != nullptr);
  AddTensorInfo(std::move(name), type, std::move(ne));
  tensors_.back().fill = std::move(fill);
}

std::vector<uint8_t> Writer::SerializeHeader() const {
  std::vector<uint8_t> out;
  Append(&out, kMagic);
  Append(&out, version_);
  Append<uint64_t>(&out, tensors_.size());
  Append<uint64_t>(&out, kv_.size());
  for (const KeyValue& kv : kv_) {
    AppendString(&out, kv.key);
    Append(&out, static_cast<uint32_t>(kv.value.type));
    AppendValue(&out, kv.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    AppendString(&out, t.name);
    Append(&out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Append(&out, d);
    Append(&out, static_cast<uint32_t>(t.type));
    Append(&out, offset);
    offset = AlignUp(offset + t.n_bytes, alignment_);
  }
  out.resize(AlignUp(out.size(), alignment_), 0);
  return out;
}

Status Writer::FillTensor(const Tensor& t, std::vector<uint8_t>* scratch,
                          std::span<const uint8_t>* out) const {
  if (!t.fill) {
    *out = t.data;
    return Status::Ok();
  }
  scratch->assign(t.n_bytes, 0);
  COHORT_RETURN_IF_ERROR(t.fill(*scratch).Annotate("tensor '" + t.name + "'"));
  *out = *scratch;
  return Status::Ok();
}

std::vector<uint8_t> Writer::Serialize() const {
  std::vector<uint8_t> out = SerializeHeader();
  std::vector<uint8_t> scratch;
  for (const Tensor& t : tensors_) {
    std::span<const uint8_t> bytes;
    const Status status = FillTensor(t, &scratch, &bytes);
    COHORT_CHECK(status.ok());
    out.insert(out.end(), bytes.begin(), bytes.end());
    out.resize(AlignUp(out.size(), alignment_), 0);
  }
  return out;
}

Status Writer::WriteFile(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return IoError(tmp + ": " + std::strerror(errno));
  auto write = [&](std::span<const uint8_t> bytes) {
    return bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  };
  Status status;
  bool ok = write(SerializeHeader());
  std::vector<uint8_t> scratch;
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (size_t i = 0; ok && status.ok() && i < tensors_.size(); ++i) {
    std::span<const uint8_t> bytes;
    status = FillTensor(tensors_[i], &scratch, &bytes);
    if (!status.ok()) break;
    const uint64_t pad = AlignUp(bytes.size(), alignment_) - bytes.size();
    ok = write(bytes) && write(std::span(zeros).first(pad));
  }
  if (!ok && status.ok()) status = IoError(tmp + ": write failed: " + std::strerror(errno));
  if (std::fclose(f) != 0 && status.ok()) status = IoError(tmp + ": close failed: " + std::strerror(errno));
  if (status.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    status = IoError(path + ": rename failed: " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(tmp.c_str());
  return status;
}

}  // namespace cohort::gguf
