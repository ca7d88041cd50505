// GGUF writer: collects metadata and tensors, then writes a v3 (or v2) file with aligned data.
// Used by `cohort synth` and by tests. Tensor bytes may be held in memory or produced by a
// callback at write time, so multi-GB models stream to disk one tensor at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "gguf/value.h"

namespace cohort::gguf {

class Writer {
 public:
  // version 2 or 3 (same layout); alignment a nonzero power of two, written as
  // general.alignment when it is not the default 32.
  explicit Writer(uint32_t version = 3, uint64_t alignment = 32);

  // Fills `out`, which has exactly the tensor's byte size, with the tensor's data.
  using FillFn = std::function<Status(std::span<uint8_t> out)>;

  void Set(std::string key, Value value);  // replaces an existing key
  void SetString(std::string key, std::string v);
  void SetUint32(std::string key, uint32_t v);
  void SetInt32(std::string key, int32_t v);
  void SetFloat32(std::string key, float v);
  void SetBool(std::string key, bool v);
  void SetStringArray(std::string key, const std::vector<std::string>& v);

  // ne in ggml order; `data` must hold exactly the bytes the type and shape need (checked).
  // Names must be unique; shapes valid for the type (ne[0] a multiple of the block size).
  void AddTensor(std::string name, DType type, std::vector<int64_t> ne, std::vector<uint8_t> data);
  // Streaming variant: `fill` runs when the file is written (WriteFile calls it with one reused
  // buffer, so memory is bounded by the largest tensor, not the model).
  void AddStreamedTensor(std::string name, DType type, std::vector<int64_t> ne, FillFn fill);

  // Bytes a tensor of this type and shape occupies (checked: ne valid for the type).
  static uint64_t TensorBytes(DType type, const std::vector<int64_t>& ne);

  // The whole file in memory (tests). A failing FillFn is a programmer error here.
  std::vector<uint8_t> Serialize() const;
  // Writes `path` via a temporary file renamed into place, so a failure leaves no partial file.
  Status WriteFile(const std::string& path) const;
  // Header, metadata and tensor infos, padded to where the data section starts.
  std::vector<uint8_t> SerializeHeader() const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes = 0;
    std::vector<uint8_t> data;  // used when `fill` is empty
    FillFn fill;
  };
  void AddTensorInfo(std::string name, DType type, std::vector<int64_t> ne);
  Status FillTensor(const Tensor& t, std::vector<uint8_t>* scratch,
                    std::span<const uint8_t>* out) const;
  uint32_t version_;
  uint64_t alignment_;
  std::vector<KeyValue> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace cohort::gguf
