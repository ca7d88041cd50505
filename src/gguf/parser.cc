// Parses GGUF v2/v3 bytes into a File. The input is untrusted: every count, length and offset
// is checked against the bytes that remain (with overflow-checked arithmetic) before it is
// used, and nothing is allocated from a count that the remaining bytes could not back.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <string>

#include "gguf/gguf.h"

namespace cohort::gguf {
namespace {

static_assert(std::endian::native == std::endian::little, "GGUF is read as little-endian");

// The least bytes one metadata entry / tensor info can occupy on disk: what a claimed count
// must be able to back before we believe it.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;             // key length, type, a u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinArrayBytes = 4 + 8;               // element type, count

std::string Quote(std::string_view s) {
  // Names come from the file; keep error messages short and printable.
  std::string out = "'";
  for (char c : s.substr(0, 96)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  if (s.size() > 96) out += "...";
  return out + "'";
}

uint64_t MinElementBytes(ValueType type) {
  if (type == ValueType::kString) return 8;
  if (type == ValueType::kArray) return kMinArrayBytes;
  return static_cast<uint64_t>(ScalarSize(type));
}

}  // namespace

class File::Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const ReadLimits& limits, File& file)
      : bytes_(bytes), limits_(limits), file_(file) {}

  Status Run() {
    uint64_t n_tensors = 0;
    uint64_t n_kv = 0;
    COHORT_RETURN_IF_ERROR(ReadHeader(&n_tensors, &n_kv));
    COHORT_RETURN_IF_ERROR(ReadKeyValues(n_kv));
    COHORT_RETURN_IF_ERROR(ApplyAlignment());
    COHORT_RETURN_IF_ERROR(ReadTensorInfos(n_tensors));
    return PlaceTensors();
  }

 private:
  uint64_t remaining() const { return bytes_.size() - pos_; }

  std::string At() const { return "at byte " + std::to_string(pos_); }

  // Error descriptions are passed in pieces and joined only on failure, so the hot path
  // (hundreds of thousands of vocabulary strings) allocates nothing for them.
  Status Truncated(uint64_t need, std::string_view what, std::string_view suffix,
                   std::string_view suffix2) const {
    return Corrupt("truncated: " + Join(what, suffix, suffix2) + " " + At() + " needs " +
                   std::to_string(need) + " bytes but only " + std::to_string(remaining()) +
                   " remain (file size " + std::to_string(bytes_.size()) + ")");
  }

  static std::string Join(std::string_view a, std::string_view b, std::string_view c = {}) {
    std::string out(a);
    return out.append(b).append(c);
  }

  template <typename T>
  Status Read(T* out, std::string_view what, std::string_view suffix = {},
              std::string_view suffix2 = {}) {
    if (remaining() < sizeof(T)) return Truncated(sizeof(T), what, suffix, suffix2);
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  // A u64 length then that many bytes. `what` + `suffix` name the string for error messages.
  Status ReadString(std::string* out, std::string_view what, std::string_view suffix = {}) {
    uint64_t n = 0;
    COHORT_RETURN_IF_ERROR(Read(&n, what, suffix, " length"));
    if (n > limits_.max_string_bytes) {
      return OutOfRange(Join(what, suffix) + " " + At() + ": length " + std::to_string(n) +
                        " exceeds the limit of " + std::to_string(limits_.max_string_bytes) +
                        " bytes");
    }
    if (n > remaining()) {
      return Corrupt(Join(what, suffix) + " " + At() + ": length " + std::to_string(n) +
                     " runs past the end of the file (" + std::to_string(remaining()) +
                     " bytes remain)");
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), static_cast<size_t>(n));
    pos_ += n;
    return Status::Ok();
  }

  Status ReadHeader(uint64_t* n_tensors, uint64_t* n_kv) {
    uint32_t magic = 0;
    if (bytes_.size() < 4) {
      return Corrupt("truncated: file is " + std::to_string(bytes_.size()) +
                     " bytes, too short for the GGUF magic");
    }
    COHORT_RETURN_IF_ERROR(Read(&magic, "magic"));
    if (magic != kMagic) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "0x%08x", magic);
      return Corrupt(std::string("bad magic ") + hex + " (expected \"GGUF\"): not a GGUF file");
    }
    uint32_t version = 0;
    COHORT_RETURN_IF_ERROR(Read(&version, "header version"));
    if (version == 1) {
      return Unsupported("GGUF version 1 is not supported (only versions 2 and 3)");
    }
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) {
        return Unsupported("big-endian GGUF (version " + std::to_string(swapped) +
                           ") is not supported");
      }
      return Unsupported("GGUF version " + std::to_string(version) +
                         " is not supported (only versions 2 and 3)");
    }
    file_.version_ = version;
    COHORT_RETURN_IF_ERROR(Read(n_tensors, "header tensor count"));
    COHORT_RETURN_IF_ERROR(Read(n_kv, "header metadata count"));
    if (*n_tensors > limits_.max_tensors) {
      return OutOfRange("header claims " + std::to_string(*n_tensors) +
                        " tensors, more than the limit of " +
                        std::to_string(limits_.max_tensors));
    }
    if (*n_kv > limits_.max_kv) {
      return OutOfRange("header claims " + std::to_string(*n_kv) +
                        " metadata entries, more than the limit of " +
                        std::to_string(limits_.max_kv));
    }
    // The tensor count is checked against the bytes left after the metadata, when known.
    return CheckCount(*n_kv, kMinKvBytes, "metadata entries");
  }

  // A count of entries each at least `min_bytes` long must fit in what remains.
  Status CheckCount(uint64_t count, uint64_t min_bytes, std::string_view what) const {
    if (count > remaining() / min_bytes) {
      return Corrupt("header claims " + std::to_string(count) + " " + std::string(what) +
                     " but only " + std::to_string(remaining()) + " bytes remain " + At() +
                     " (each needs at least " + std::to_string(min_bytes) +
                     "): the count is wrong or the file is truncated");
    }
    return Status::Ok();
  }

  Status ReadKeyValues(uint64_t n_kv) {
    file_.kv_.reserve(static_cast<size_t>(n_kv));  // backed by the bytes: checked in the header
    for (uint64_t i = 0; i < n_kv; ++i) {
      const uint64_t start = pos_;
      KeyValue kv;
      COHORT_RETURN_IF_ERROR(ReadString(&kv.key, "metadata key #" + std::to_string(i)));
      if (file_.kv_index_.count(kv.key) != 0) {
        return Corrupt("duplicate metadata key " + Quote(kv.key) + " at byte " +
                       std::to_string(start));
      }
      const std::string what = "key " + Quote(kv.key);
      uint32_t type_id = 0;
      COHORT_RETURN_IF_ERROR(Read(&type_id, what, " value type"));
      if (!IsKnownValueType(type_id)) {
        return Corrupt(what + " at byte " + std::to_string(pos_ - 4) + ": unknown value type " +
                       std::to_string(type_id));
      }
      COHORT_RETURN_IF_ERROR(ReadValue(static_cast<ValueType>(type_id), 0, what, &kv.value));
      file_.kv_index_.emplace(kv.key, file_.kv_.size());
      file_.kv_.push_back(std::move(kv));
    }
    return Status::Ok();
  }

  Status ReadValue(ValueType type, int depth, const std::string& what, Value* out) {
    out->type = type;
    switch (type) {
      case ValueType::kUint8: return ReadUint<uint8_t>(what, out);
      case ValueType::kUint16: return ReadUint<uint16_t>(what, out);
      case ValueType::kUint32: return ReadUint<uint32_t>(what, out);
      case ValueType::kUint64: return ReadUint<uint64_t>(what, out);
      case ValueType::kInt8: return ReadInt<int8_t>(what, out);
      case ValueType::kInt16: return ReadInt<int16_t>(what, out);
      case ValueType::kInt32: return ReadInt<int32_t>(what, out);
      case ValueType::kInt64: return ReadInt<int64_t>(what, out);
      case ValueType::kFloat32: return ReadFloat<float>(what, out);
      case ValueType::kFloat64: return ReadFloat<double>(what, out);
      case ValueType::kBool: {
        uint8_t b = 0;
        COHORT_RETURN_IF_ERROR(Read(&b, what, " bool value"));
        if (b > 1) {
          return Corrupt(what + " at byte " + std::to_string(pos_ - 1) + ": bool value " +
                         std::to_string(b) + " is neither 0 nor 1");
        }
        out->data = b == 1;
        return Status::Ok();
      }
      case ValueType::kString: {
        std::string s;
        COHORT_RETURN_IF_ERROR(ReadString(&s, what, " string value"));
        out->data = std::move(s);
        return Status::Ok();
      }
      case ValueType::kArray: return ReadArray(depth + 1, what, out);
    }
    return Corrupt(what + ": unknown value type " + std::to_string(static_cast<uint32_t>(type)));
  }

  template <typename T>
  Status ReadUint(const std::string& what, Value* out) {
    T v{};
    COHORT_RETURN_IF_ERROR(Read(&v, what, " value"));
    out->data = static_cast<uint64_t>(v);
    return Status::Ok();
  }
  template <typename T>
  Status ReadInt(const std::string& what, Value* out) {
    T v{};
    COHORT_RETURN_IF_ERROR(Read(&v, what, " value"));
    out->data = static_cast<int64_t>(v);
    return Status::Ok();
  }
  template <typename T>
  Status ReadFloat(const std::string& what, Value* out) {
    T v{};
    COHORT_RETURN_IF_ERROR(Read(&v, what, " value"));
    out->data = static_cast<double>(v);
    return Status::Ok();
  }

  Status ReadArray(int depth, const std::string& what, Value* out) {
    if (depth > limits_.max_array_depth) {
      return OutOfRange(what + " " + At() + ": arrays nested deeper than the limit of " +
                        std::to_string(limits_.max_array_depth));
    }
    uint32_t type_id = 0;
    COHORT_RETURN_IF_ERROR(Read(&type_id, what, " array element type"));
    if (!IsKnownValueType(type_id)) {
      return Corrupt(what + " at byte " + std::to_string(pos_ - 4) +
                     ": unknown array element type " + std::to_string(type_id));
    }
    const auto element_type = static_cast<ValueType>(type_id);
    uint64_t count = 0;
    COHORT_RETURN_IF_ERROR(Read(&count, what, " array count"));
    COHORT_RETURN_IF_ERROR(CheckArrayCount(count, element_type, what));
    Array array;
    array.element_type = element_type;
    array.items.resize(static_cast<size_t>(count));
    for (uint64_t i = 0; i < count; ++i) {
      COHORT_RETURN_IF_ERROR(ReadValue(element_type, depth, what, &array.items[i]));
    }
    out->data = std::move(array);
    return Status::Ok();
  }

  Status CheckArrayCount(uint64_t count, ValueType element_type, const std::string& what) {
    if (count > limits_.max_array_elements) {
      return OutOfRange(what + " " + At() + ": array of " + std::to_string(count) +
                        " elements exceeds the limit of " +
                        std::to_string(limits_.max_array_elements));
    }
    const uint64_t min_bytes = MinElementBytes(element_type);
    if (count > remaining() / min_bytes) {
      return Corrupt(what + " " + At() + ": array of " + std::to_string(count) + " " +
                     std::string(ValueTypeName(element_type)) +
                     " elements runs past the end of the file (" +
                     std::to_string(remaining()) + " bytes remain)");
    }
    total_array_elements_ += count;  // cannot overflow: each count is below the file size
    if (total_array_elements_ > limits_.max_total_array_elements) {
      return OutOfRange(what + " " + At() + ": the file's arrays hold more than " +
                        std::to_string(limits_.max_total_array_elements) +
                        " elements in total, the limit");
    }
    return Status::Ok();
  }

  Status ApplyAlignment() {
    auto it = file_.kv_index_.find("general.alignment");
    if (it == file_.kv_index_.end()) return Status::Ok();
    const Value& v = file_.kv_[it->second].value;
    if (v.type != ValueType::kUint32) {
      return Corrupt("general.alignment must be a u32, not " +
                     std::string(ValueTypeName(v.type)));
    }
    const uint64_t alignment = std::get<uint64_t>(v.data);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
      return Corrupt("general.alignment " + std::to_string(alignment) +
                     " is not a nonzero power of two");
    }
    file_.alignment_ = alignment;
    return Status::Ok();
  }

  Status ReadTensorInfos(uint64_t n_tensors) {
    COHORT_RETURN_IF_ERROR(CheckCount(n_tensors, kMinTensorInfoBytes, "tensors"));
    file_.tensors_.reserve(static_cast<size_t>(n_tensors));
    for (uint64_t i = 0; i < n_tensors; ++i) {
      const uint64_t start = pos_;
      TensorInfo info;
      COHORT_RETURN_IF_ERROR(ReadTensorInfo(i, &info));
      if (file_.tensor_index_.count(info.name) != 0) {
        return Corrupt("duplicate tensor name " + Quote(info.name) + " at byte " +
                       std::to_string(start));
      }
      file_.tensor_index_.emplace(info.name, file_.tensors_.size());
      file_.tensors_.push_back(std::move(info));
    }
    return Status::Ok();
  }

  Status ReadTensorInfo(uint64_t index, TensorInfo* info) {
    COHORT_RETURN_IF_ERROR(ReadString(&info->name, "tensor #" + std::to_string(index) + " name"));
    const std::string what = "tensor " + Quote(info->name);
    if (info->name.empty()) return Corrupt("tensor #" + std::to_string(index) + " has an empty name");
    uint32_t n_dims = 0;
    COHORT_RETURN_IF_ERROR(Read(&n_dims, what, " n_dims"));
    if (n_dims > static_cast<uint32_t>(kMaxDims)) {
      return Corrupt(what + " " + At() + ": n_dims " + std::to_string(n_dims) +
                     " exceeds the maximum of " + std::to_string(kMaxDims));
    }
    info->ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      COHORT_RETURN_IF_ERROR(Read(&info->ne[d], what, " ne"));
      if (info->ne[d] < 0) {
        return Corrupt(what + ": ne[" + std::to_string(d) + "] = " +
                       std::to_string(info->ne[d]) + " is negative");
      }
    }
    uint32_t type_id = 0;
    COHORT_RETURN_IF_ERROR(Read(&type_id, what, " type"));
    const std::optional<DTypeTraits> traits = FindDType(type_id);
    if (!traits) {
      return Unsupported(what + ": unknown ggml type id " + std::to_string(type_id));
    }
    info->type = traits->type;
    COHORT_RETURN_IF_ERROR(Read(&info->offset, what, " offset"));
    return ComputeBytes(what, *traits, info);
  }

  static Status ComputeBytes(const std::string& what, const DTypeTraits& traits,
                             TensorInfo* info) {
    int64_t n_elements = 1;
    int64_t rows = 1;
    for (size_t d = 0; d < info->ne.size(); ++d) {
      if (__builtin_mul_overflow(n_elements, info->ne[d], &n_elements) ||
          (d > 0 && __builtin_mul_overflow(rows, info->ne[d], &rows))) {
        return Corrupt(what + ": element count overflows (shape too large)");
      }
    }
    const int64_t ne0 = info->ne.empty() ? 1 : info->ne[0];
    if (ne0 % traits.block_size != 0) {
      return Corrupt(what + ": ne[0] = " + std::to_string(ne0) +
                     " is not a multiple of the " + std::string(traits.name) +
                     " block size " + std::to_string(traits.block_size));
    }
    int64_t row_bytes = 0;
    int64_t n_bytes = 0;
    if (__builtin_mul_overflow(ne0 / traits.block_size, traits.type_size, &row_bytes) ||
        __builtin_mul_overflow(row_bytes, rows, &n_bytes)) {
      return Corrupt(what + ": byte size overflows (shape too large)");
    }
    info->n_bytes = static_cast<uint64_t>(n_bytes);
    return Status::Ok();
  }

  Status PlaceTensors() {
    const uint64_t alignment = file_.alignment_;
    uint64_t data_offset = 0;
    if (__builtin_add_overflow(pos_, alignment - 1, &data_offset)) {
      return Corrupt("data section offset overflows");
    }
    data_offset -= data_offset % alignment;
    file_.data_offset_ = data_offset;
    if (file_.tensors_.empty()) return Status::Ok();
    if (data_offset > bytes_.size()) {
      return Corrupt("truncated: the data section would start at byte " +
                     std::to_string(data_offset) + ", past the end of the file (size " +
                     std::to_string(bytes_.size()) + ")");
    }
    const uint64_t data_size = bytes_.size() - data_offset;
    for (const TensorInfo& t : file_.tensors_) {
      if (t.offset % alignment != 0) {
        return Corrupt("tensor " + Quote(t.name) + ": offset " + std::to_string(t.offset) +
                       " is not a multiple of the alignment " + std::to_string(alignment));
      }
      if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
        return Corrupt("tensor " + Quote(t.name) + ": data [" + std::to_string(t.offset) +
                       ", +" + std::to_string(t.n_bytes) +
                       ") runs past the end of the file (data section holds " +
                       std::to_string(data_size) + " bytes)");
      }
    }
    return CheckOverlaps();
  }

  Status CheckOverlaps() const {
    const std::vector<TensorInfo>& tensors = file_.tensors_;
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return tensors[a].offset < tensors[b].offset; });
    // Ranges are inside the file (checked), so offset + n_bytes cannot overflow here.
    const TensorInfo* furthest = nullptr;
    for (size_t i : order) {
      const TensorInfo& t = tensors[i];
      if (t.n_bytes == 0) continue;
      if (furthest != nullptr && t.offset < furthest->offset + furthest->n_bytes) {
        return Corrupt("tensor " + Quote(t.name) + " data at offset " +
                       std::to_string(t.offset) + " overlaps tensor " + Quote(furthest->name) +
                       " [" + std::to_string(furthest->offset) + ", " +
                       std::to_string(furthest->offset + furthest->n_bytes) + ")");
      }
      if (furthest == nullptr ||
          t.offset + t.n_bytes > furthest->offset + furthest->n_bytes) {
        furthest = &t;
      }
    }
    return Status::Ok();
  }

  std::span<const uint8_t> bytes_;
  const ReadLimits& limits_;
  File& file_;
  uint64_t pos_ = 0;
  uint64_t total_array_elements_ = 0;
};

Result<std::unique_ptr<File>> File::Parse(std::span<const uint8_t> bytes,
                                          const ReadLimits& limits) {
  std::unique_ptr<File> file(new File());
  file->bytes_ = bytes;
  Parser parser(bytes, limits, *file);
  COHORT_RETURN_IF_ERROR(parser.Run());
  return file;
}

}  // namespace cohort::gguf
