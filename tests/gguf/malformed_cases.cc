// Builds GGUF files byte by byte (no Writer, which refuses to write bad files) and mutates a
// small valid file into one file per defect.
#include "malformed_cases.h"

#include <cstring>
#include <optional>
#include <string_view>

namespace cohort::gguf::testing {
namespace {

constexpr uint32_t kTypeU8 = 0, kTypeU32 = 4, kTypeI32 = 5, kTypeF32 = 6, kTypeBool = 7,
                   kTypeString = 8, kTypeArray = 9, kTypeU64 = 10;
constexpr uint32_t kGgmlF32 = 0, kGgmlQ4_0 = 2;

class Bytes {
 public:
  template <typename T>
  Bytes& Put(T v) {
    const size_t at = b_.size();
    b_.resize(at + sizeof(T));
    std::memcpy(b_.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& Str(std::string_view s) {
    Put<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& Append(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  std::vector<uint8_t> take() { return std::move(b_); }

 private:
  std::vector<uint8_t> b_;
};

// One metadata entry: key, type, then the already-encoded value.
std::vector<uint8_t> Kv(std::string_view key, uint32_t type, const std::vector<uint8_t>& value) {
  return Bytes().Str(key).Put(type).Append(value).take();
}
std::vector<uint8_t> KvString(std::string_view key, std::string_view v) {
  return Kv(key, kTypeString, Bytes().Str(v).take());
}
std::vector<uint8_t> KvU32(std::string_view key, uint32_t v) {
  return Kv(key, kTypeU32, Bytes().Put(v).take());
}

struct RawTensor {
  std::string name;
  std::vector<int64_t> ne;
  uint32_t type = kGgmlF32;
  uint64_t offset = 0;
  std::optional<uint32_t> n_dims;  // overrides ne.size() when set
};

struct RawFile {
  uint32_t magic = 0x46554747;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;  // override the true counts to make a header lie
  std::optional<uint64_t> n_kv;
  std::vector<std::vector<uint8_t>> kvs;
  std::vector<RawTensor> tensors;
  uint64_t alignment = 32;  // for padding only; set general.alignment in kvs yourself
  uint64_t data_bytes = 0;  // zero bytes after the aligned data start
};

std::vector<uint8_t> Build(const RawFile& f) {
  Bytes b;
  b.Put(f.magic).Put(f.version);
  b.Put<uint64_t>(f.n_tensors.value_or(f.tensors.size()));
  b.Put<uint64_t>(f.n_kv.value_or(f.kvs.size()));
  for (const auto& kv : f.kvs) b.Append(kv);
  for (const RawTensor& t : f.tensors) {
    b.Str(t.name).Put<uint32_t>(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
    for (int64_t d : t.ne) b.Put(d);
    b.Put(t.type).Put(t.offset);
  }
  std::vector<uint8_t> out = b.take();
  if (f.data_bytes > 0 || !f.tensors.empty()) {
    const uint64_t a = f.alignment == 0 ? 1 : f.alignment;
    out.resize((out.size() + a - 1) / a * a, 0);
  }
  out.resize(out.size() + f.data_bytes, 0);
  return out;
}

// The valid base: 3 kvs, three tensors (f32 [8,2] = 64 bytes, q4_0 [32,2] = 36 bytes at 64,
// f32 [4] = 16 bytes at 128), data 160 bytes (the last padded to 32).
RawFile ValidBase() {
  RawFile f;
  f.kvs.push_back(KvString("general.architecture", "llama"));
  f.kvs.push_back(KvU32("llama.block_count", 1));
  f.kvs.push_back(Kv("tokenizer.ggml.scores", kTypeArray,
                     Bytes().Put(kTypeF32).Put<uint64_t>(2).Put(0.5f).Put(-1.0f).take()));
  f.tensors.push_back({"a.weight", {8, 2}, kGgmlF32, 0, {}});
  f.tensors.push_back({"b.weight", {32, 2}, kGgmlQ4_0, 64, {}});
  f.tensors.push_back({"c.weight", {4}, kGgmlF32, 128, {}});
  f.data_bytes = 160;
  return f;
}

std::vector<uint8_t> Cut(std::vector<uint8_t> b, size_t n) {
  b.resize(n);
  return b;
}

// Nested arrays: `depth` levels of "array of one array", ending in an empty u8 array.
std::vector<uint8_t> NestedArray(int depth) {
  Bytes b;
  for (int i = 0; i < depth; ++i) b.Put(kTypeArray).Put<uint64_t>(1);
  b.Put(kTypeU8).Put<uint64_t>(0);
  return b.take();
}

void AddHeaderCases(std::vector<MalformedCase>& out) {
  const std::vector<uint8_t> valid = SmallValidFile();
  RawFile f = ValidBase();
  f.magic = 0x58554747;  // "GGUX"
  out.push_back({"bad_magic", Build(f), "bad magic"});
  f = ValidBase();
  f.version = 1;
  out.push_back({"version_1", Build(f), "version 1 is not supported"});
  f.version = 4;
  out.push_back({"version_4", Build(f), "version 4 is not supported"});
  f.version = 0x03000000;
  out.push_back({"big_endian", Build(f), "big-endian"});
  out.push_back({"empty_file", {}, "too short for the GGUF magic"});
  out.push_back({"truncated_in_magic", Cut(valid, 3), "too short for the GGUF magic"});
  out.push_back({"truncated_in_version", Cut(valid, 6), "header version"});
  out.push_back({"truncated_in_tensor_count", Cut(valid, 12), "header tensor count"});
  out.push_back({"truncated_in_kv_count", Cut(valid, 20), "header metadata count"});
  f = ValidBase();
  f.n_tensors = 1000;
  out.push_back({"lying_tensor_count", Build(f), "claims 1000 tensors"});
  f = ValidBase();
  f.n_kv = 5000;
  out.push_back({"lying_kv_count", Build(f), "claims 5000 metadata entries"});
  f = ValidBase();
  f.n_kv = 4;  // one more than present: the first tensor info is read as a kv
  out.push_back({"kv_count_off_by_one", Build(f), "tensor #0 name"});
  f = ValidBase();
  f.n_tensors = uint64_t{1} << 63;
  out.push_back({"huge_tensor_count", Build(f), "more than the limit"});
  f = ValidBase();
  f.n_kv = ~uint64_t{0};
  out.push_back({"huge_kv_count", Build(f), "more than the limit"});
}

void AddMetadataCases(std::vector<MalformedCase>& out) {
  const std::vector<uint8_t> valid = SmallValidFile();
  out.push_back({"truncated_in_key_length", Cut(valid, 28),
                 "claims 3 metadata entries but only 4 bytes remain"});
  // One long entry, so cuts inside it get past the count check: 24 header bytes, key length
  // at 24, 39 key bytes at 32, type at 71, value length at 75, 100 value bytes at 83.
  RawFile one;
  one.kvs.push_back(KvString("general.a_rather_long_key_name_for_cuts", std::string(100, 'x')));
  const std::vector<uint8_t> long_kv = Build(one);
  out.push_back({"truncated_in_key", Cut(long_kv, 50), "length 39 runs past the end"});
  out.push_back({"truncated_in_value_type", Cut(long_kv, 73),
                 "key 'general.a_rather_long_key_name_for_cuts' value type at byte 71"});
  out.push_back({"truncated_in_string_value", Cut(long_kv, 120),
                 "string value at byte 83: length 100 runs past the end"});

  RawFile f = ValidBase();
  f.kvs[0] = Kv("general.architecture", kTypeString, Bytes().Put<uint64_t>(1000).take());
  out.push_back({"string_length_past_end", Build(f), "length 1000 runs past the end"});
  f.kvs[0] = Kv("general.architecture", kTypeString, Bytes().Put<uint64_t>(~uint64_t{0}).take());
  out.push_back({"huge_string_length", Build(f), "exceeds the limit"});
  f = ValidBase();
  f.kvs[0] = Bytes().Put<uint64_t>(uint64_t{1} << 62).take();
  out.push_back({"huge_key_length", Build(f), "metadata key #0"});
  f = ValidBase();
  f.kvs[1] = Kv("llama.block_count", 13, Bytes().Put<uint32_t>(1).take());
  out.push_back({"unknown_value_type", Build(f), "unknown value type 13"});
  f.kvs[1] = Kv("llama.block_count", 0x80000000u, Bytes().Put<uint32_t>(1).take());
  out.push_back({"unknown_value_type_high_bit", Build(f), "unknown value type 2147483648"});
  f.kvs[1] = Kv("x.list", kTypeArray, Bytes().Put<uint32_t>(99).Put<uint64_t>(1).take());
  out.push_back({"unknown_array_element_type", Build(f), "unknown array element type 99"});
  f.kvs[1] = Kv("x.list", kTypeArray, Bytes().Put(kTypeU64).Put<uint64_t>(60000000).take());
  out.push_back({"array_count_past_end", Build(f), "array of 60000000 u64 elements runs past"});
  f.kvs[1] = Kv("x.list", kTypeArray, Bytes().Put(kTypeU32).Put(~uint64_t{0} / 2).take());
  out.push_back({"array_count_overflow", Build(f), "exceeds the limit"});
  f.kvs[1] = Kv("x.list", kTypeArray, Bytes().Put(kTypeString).Put<uint64_t>(3).Str("a").take());
  out.push_back({"array_string_count_lies", Build(f), "x.list"});
  f.kvs[1] = Kv("x.nest", kTypeArray, NestedArray(500));
  out.push_back({"nested_array_depth_bomb", Build(f), "nested deeper than the limit"});
  f.kvs[1] = Kv("x.flag", kTypeBool, Bytes().Put<uint8_t>(2).take());
  out.push_back({"bool_value_2", Build(f), "key 'x.flag' at byte"});
  f.kvs[1] = Kv("x.flags", kTypeArray, Bytes().Put(kTypeBool).Put<uint64_t>(2).Put<uint8_t>(1)
                                           .Put<uint8_t>(7).take());
  out.push_back({"bool_array_value_7", Build(f), "bool value 7 is neither 0 nor 1"});
  f = ValidBase();
  f.kvs[1] = KvString("general.architecture", "qwen3");
  out.push_back({"duplicate_key", Build(f), "duplicate metadata key 'general.architecture'"});
}

void AddAlignmentCases(std::vector<MalformedCase>& out) {
  RawFile f = ValidBase();
  f.kvs.push_back(KvU32("general.alignment", 0));
  out.push_back({"alignment_zero", Build(f), "general.alignment 0 is not a nonzero power of two"});
  f.kvs.back() = KvU32("general.alignment", 48);
  out.push_back({"alignment_not_power_of_two", Build(f), "general.alignment 48"});
  f.kvs.back() = KvString("general.alignment", "32");
  out.push_back({"alignment_wrong_type", Build(f), "general.alignment must be a u32, not string"});
  f.kvs.back() = KvU32("general.alignment", 0x80000000u);
  out.push_back({"alignment_huge", Build(f), "data section would start"});
}

void AddTensorCases(std::vector<MalformedCase>& out) {
  const std::vector<uint8_t> valid = SmallValidFile();
  out.push_back({"truncated_in_tensor_info", Cut(valid, 240), "tensor 'b.weight' type at byte 239"});
  out.push_back({"truncated_in_data", Cut(valid, valid.size() - 40), "tensor 'c.weight': data"});
  RawFile f = ValidBase();
  f.data_bytes = 0;
  out.push_back({"no_data_section", Cut(Build(f), Build(f).size() - 4), "data section would start"});

  auto with = [](auto mutate) {
    RawFile g = ValidBase();
    mutate(g);
    return Build(g);
  };
  out.push_back({"n_dims_5", with([](RawFile& g) { g.tensors[0].ne = {8, 2, 1, 1, 1}; }),
                 "n_dims 5 exceeds the maximum of 4"});
  out.push_back({"n_dims_huge", with([](RawFile& g) { g.tensors[0].n_dims = 0xffffffffu; }),
                 "n_dims 4294967295"});
  out.push_back({"negative_ne", with([](RawFile& g) { g.tensors[1].ne = {32, -2}; }),
                 "tensor 'b.weight': ne[1] = -2 is negative"});
  out.push_back({"ne_product_overflow",
                 with([](RawFile& g) { g.tensors[0].ne = {1 << 20, 1 << 20, 1 << 20, 1 << 20}; }),
                 "element count overflows"});
  out.push_back({"byte_size_overflow",
                 with([](RawFile& g) { g.tensors[0].ne = {int64_t{1} << 62, 1}; }),
                 "byte size overflows"});
  out.push_back({"ne0_not_block_multiple", with([](RawFile& g) { g.tensors[1].ne = {33, 2}; }),
                 "ne[0] = 33 is not a multiple of the q4_0 block size 32"});
  out.push_back({"unknown_ggml_type_removed_q4_2", with([](RawFile& g) { g.tensors[1].type = 4; }),
                 "tensor 'b.weight': unknown ggml type id 4"});
  out.push_back({"unknown_ggml_type_1000", with([](RawFile& g) { g.tensors[1].type = 1000; }),
                 "unknown ggml type id 1000"});
  out.push_back({"tensor_offset_past_end",
                 with([](RawFile& g) { g.tensors[2].offset = 4096; }),
                 "tensor 'c.weight': data [4096, +16) runs past the end"});
  out.push_back({"tensor_offset_huge",
                 with([](RawFile& g) { g.tensors[2].offset = ~uint64_t{0} - 31; }),
                 "runs past the end"});
  out.push_back({"tensor_end_past_end",
                 with([](RawFile& g) { g.tensors[2].ne = {64}; }),
                 "tensor 'c.weight': data [128, +256) runs past the end"});
  out.push_back({"misaligned_offset", with([](RawFile& g) { g.tensors[1].offset = 66; }),
                 "offset 66 is not a multiple of the alignment 32"});
  out.push_back({"overlapping_tensors", with([](RawFile& g) { g.tensors[1].offset = 32; }),
                 "tensor 'b.weight' data at offset 32 overlaps tensor 'a.weight'"});
  out.push_back({"duplicate_tensor_name", with([](RawFile& g) { g.tensors[2].name = "a.weight"; }),
                 "duplicate tensor name 'a.weight'"});
  out.push_back({"empty_tensor_name", with([](RawFile& g) { g.tensors[0].name = ""; }),
                 "tensor #0 has an empty name"});
  out.push_back({"tensor_name_past_end",
                 with([](RawFile& g) {
                   g.tensors.resize(1);
                   g.tensors[0].name = std::string(40, 'x');
                   g.data_bytes = 0;
                   g.alignment = 1;  // no padding: the file ends after the first info
                   g.n_tensors = 2;
                 }),
                 "tensor #1 name"});
}

}  // namespace

std::vector<uint8_t> SmallValidFile() { return Build(ValidBase()); }

std::vector<MalformedCase> MalformedCases() {
  std::vector<MalformedCase> out;
  AddHeaderCases(out);
  AddMetadataCases(out);
  AddAlignmentCases(out);
  AddTensorCases(out);
  return out;
}

}  // namespace cohort::gguf::testing
