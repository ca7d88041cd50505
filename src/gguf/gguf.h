// GGUF reader: parses the header, metadata and tensor infos of a GGUF v2/v3 file and maps the
// tensor data. Every count, length and offset is validated against the file size before use,
// so a truncated or hostile file yields a Status naming the problem, never a crash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/value.h"

namespace cohort::gguf {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint64_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;

// Limits that bound what a parse may allocate or walk, whatever the file claims.
struct ReadLimits {
  uint64_t max_tensors = 1u << 20;
  uint64_t max_kv = 1u << 20;
  uint64_t max_string_bytes = 1u << 26;     // one string (a chat template can be large)
  uint64_t max_array_elements = 1u << 26;   // one array (vocabularies run to ~256k)
  int max_array_depth = 8;                  // nested arrays
  // All array elements of the file together. Each parsed element costs ~48 bytes of memory
  // however small it is on disk, so this caps what a hostile file can make us allocate.
  uint64_t max_total_array_elements = 1u << 23;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  DType type;
  uint64_t offset = 0;      // from the start of the data section
  uint64_t n_bytes = 0;     // derived from ne and type
  int64_t n_elements() const;
  int64_t n_rows() const;   // product of ne[1..]
};

// A parsed GGUF. Open() maps the file; Parse() reads from caller-owned bytes (fuzzing, tests).
class File {
 public:
  static Result<std::unique_ptr<File>> Open(const std::string& path, const ReadLimits& limits = {});
  // Parses `bytes` without copying the tensor data; `bytes` must outlive the File.
  static Result<std::unique_ptr<File>> Parse(std::span<const uint8_t> bytes,
                                             const ReadLimits& limits = {});
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::string& path() const { return path_; }
  uint64_t file_size() const { return bytes_.size(); }
  std::span<const uint8_t> bytes() const { return bytes_; }  // the whole file, as mapped
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts

  const std::vector<KeyValue>& metadata() const { return kv_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

  const Value* Find(std::string_view key) const;          // nullptr when absent
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed metadata lookups. Absent key -> kNotFound; wrong type -> kCorrupt naming the key.
  // Integer getters accept any integer type whose value fits.
  Result<int64_t> GetInt(std::string_view key) const;
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;  // accepts f32/f64 and integers
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string> GetString(std::string_view key) const;
  // With a default for absent keys (a present key of the wrong type is still an error).
  Result<int64_t> GetInt(std::string_view key, int64_t fallback) const;
  Result<double> GetFloat(std::string_view key, double fallback) const;
  Result<bool> GetBool(std::string_view key, bool fallback) const;
  Result<std::string> GetString(std::string_view key, std::string fallback) const;
  // An array value (kNotFound when absent, kCorrupt when not an array). The pointer lives as
  // long as the File.
  Result<const Array*> GetArray(std::string_view key) const;

  // The bytes of a tensor's data (validated at parse time to lie inside the file).
  std::span<const uint8_t> TensorData(const TensorInfo& info) const;
  // Bytes [begin, end) of a tensor's data, e.g. one rank's rows. Checked.
  std::span<const uint8_t> TensorBytes(const TensorInfo& info, uint64_t begin, uint64_t end) const;

  // The architecture string ("llama", "qwen3", ...), or "" if general.architecture is absent.
  std::string architecture() const;

 private:
  File() = default;
  class Parser;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> kv_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> kv_index_;      // key -> index into kv_
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> index into tensors_
  std::span<const uint8_t> bytes_;  // the whole file (mapped or borrowed)
  void* map_ = nullptr;             // non-null when this File owns an mmap
  size_t map_size_ = 0;
};

}  // namespace cohort::gguf
