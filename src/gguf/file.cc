// File: maps a GGUF read-only and answers typed metadata and tensor-data queries on it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "gguf/gguf.h"

namespace cohort::gguf {

int64_t TensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // validated at parse time not to overflow
  return n;
}

int64_t TensorInfo::n_rows() const {
  int64_t n = 1;
  for (size_t d = 1; d < ne.size(); ++d) n *= ne[d];
  return n;
}

Result<std::unique_ptr<File>> File::Open(const std::string& path, const ReadLimits& limits) {
  // O_NONBLOCK: a FIFO (or a device) named as the model must not block this open() forever
  // (`cohort serve -m FIFO` did, with its stop signals blocked); it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFound(path + ": no such file");
    return IoError(path + ": open failed: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError(path + ": fstat failed: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgument(path + ": not a regular file");
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* map = nullptr;
  if (size > 0) {
    map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return IoError(path + ": mmap failed: " + std::strerror(err));
    }
  }
  ::close(fd);  // the mapping stays valid without the descriptor

  std::span<const uint8_t> bytes;
  if (map != nullptr) bytes = {static_cast<const uint8_t*>(map), size};
  Result<std::unique_ptr<File>> parsed = Parse(bytes, limits);
  if (!parsed.ok()) {
    if (map != nullptr) ::munmap(map, size);
    return parsed.status().Annotate(path);
  }
  std::unique_ptr<File> file = std::move(parsed).value();
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = size;
  return file;
}

File::~File() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const Value* File::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].value;
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

Status Missing(std::string_view key) { return NotFound("missing metadata key '" + std::string(key) + "'"); }

Status WrongType(std::string_view key, const Value& v, std::string_view wanted) {
  return Corrupt("metadata key '" + std::string(key) + "' is a " +
                 std::string(ValueTypeName(v.type)) + ", expected " + std::string(wanted));
}

}  // namespace

Result<int64_t> File::GetInt(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (IsSignedType(v->type)) return std::get<int64_t>(v->data);
  if (IsUnsignedType(v->type)) {
    const uint64_t u = std::get<uint64_t>(v->data);
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Corrupt("metadata key '" + std::string(key) + "' value " + std::to_string(u) +
                     " does not fit in int64");
    }
    return static_cast<int64_t>(u);
  }
  return WrongType(key, *v, "an integer");
}

Result<uint64_t> File::GetUint(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (IsUnsignedType(v->type)) return std::get<uint64_t>(v->data);
  if (IsSignedType(v->type)) {
    const int64_t i = std::get<int64_t>(v->data);
    if (i < 0) {
      return Corrupt("metadata key '" + std::string(key) + "' value " + std::to_string(i) +
                     " is negative, expected an unsigned integer");
    }
    return static_cast<uint64_t>(i);
  }
  return WrongType(key, *v, "an integer");
}

Result<double> File::GetFloat(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->is_float()) return std::get<double>(v->data);
  if (IsSignedType(v->type)) return static_cast<double>(std::get<int64_t>(v->data));
  if (IsUnsignedType(v->type)) return static_cast<double>(std::get<uint64_t>(v->data));
  return WrongType(key, *v, "a number");
}

Result<bool> File::GetBool(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type == ValueType::kBool) return std::get<bool>(v->data);
  return WrongType(key, *v, "a bool");
}

Result<std::string> File::GetString(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (v->type == ValueType::kString) return std::get<std::string>(v->data);
  return WrongType(key, *v, "a string");
}

Result<int64_t> File::GetInt(std::string_view key, int64_t fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetInt(key);
}

Result<double> File::GetFloat(std::string_view key, double fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetFloat(key);
}

Result<bool> File::GetBool(std::string_view key, bool fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetBool(key);
}

Result<std::string> File::GetString(std::string_view key, std::string fallback) const {
  if (Find(key) == nullptr) return fallback;
  return GetString(key);
}

Result<const Array*> File::GetArray(std::string_view key) const {
  const Value* v = Find(key);
  if (v == nullptr) return Missing(key);
  if (const Array* a = v->array()) return a;
  return WrongType(key, *v, "an array");
}

std::span<const uint8_t> File::TensorData(const TensorInfo& info) const {
  return TensorBytes(info, 0, info.n_bytes);
}

std::span<const uint8_t> File::TensorBytes(const TensorInfo& info, uint64_t begin,
                                           uint64_t end) const {
  COHORT_CHECK_LE(begin, end);
  COHORT_CHECK_LE(end, info.n_bytes);
  // The info must be one of ours: its range was validated against this file at parse time.
  COHORT_CHECK_LE(data_offset_, bytes_.size());
  COHORT_CHECK_LE(info.offset, bytes_.size() - data_offset_);
  COHORT_CHECK_LE(info.n_bytes, bytes_.size() - data_offset_ - info.offset);
  return bytes_.subspan(data_offset_ + info.offset + begin, end - begin);
}

std::string File::architecture() const {
  const Value* v = Find("general.architecture");
  if (v == nullptr || v->type != ValueType::kString) return "";
  return std::get<std::string>(v->data);
}

}  // namespace cohort::gguf
