// GGUF writer: collects metadata and tensors, then writes a v3 file with aligned data.
// Used by `cohort synth`, by tests, and to build the malformed-file corpus.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/value.h"

namespace cohort::gguf {

class Writer {
 public:
  explicit Writer(uint32_t version = 3, uint64_t alignment = 32);

  void Set(std::string key, Value value);  // replaces an existing key
  void SetString(std::string key, std::string v);
  void SetUint32(std::string key, uint32_t v);
  void SetInt32(std::string key, int32_t v);
  void SetFloat32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetStringArray(std::string key, const std::vector<std::string>& v);

  // ne in ggml order; `data` must hold exactly the bytes the type and shape need (checked).
  void AddTensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data);

  // The whole file in memory (tests), or written to `path`.
  std::vector<uint8_t> Serialize() const;
  Status WriteFile(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  uint32_t version_;
  uint64_t alignment_;
  std::vector<KeyValue> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace cohort::gguf
