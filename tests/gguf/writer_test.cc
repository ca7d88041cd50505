// Writer round trips: every value type (nested arrays included) and tensors of many types are
// written, read back and compared; a real fixture re-serialised must come out byte-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/writer.h"

namespace cohort::gguf {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> Pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> out(n);
  for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 8));
  return out;
}

std::vector<KeyValue> EveryValueType() {
  using VT = ValueType;
  std::vector<KeyValue> kv = {
      {"t.u8", Value::Uint(VT::kUint8, 255)},
      {"t.i8", Value::Int(VT::kInt8, -128)},
      {"t.u16", Value::Uint(VT::kUint16, 65535)},
      {"t.i16", Value::Int(VT::kInt16, -32768)},
      {"t.u32", Value::Uint(VT::kUint32, 4294967295u)},
      {"t.i32", Value::Int(VT::kInt32, std::numeric_limits<int32_t>::min())},
      {"t.u64", Value::Uint(VT::kUint64, std::numeric_limits<uint64_t>::max())},
      {"t.i64", Value::Int(VT::kInt64, std::numeric_limits<int64_t>::min())},
      {"t.f32", Value::Float(VT::kFloat32, -1.5e-7f)},
      {"t.f64", Value::Float(VT::kFloat64, 3.141592653589793)},
      {"t.bool_true", Value::Bool(true)},
      {"t.bool_false", Value::Bool(false)},
      {"t.string", Value::String("héllo\nworld")},
      {"t.empty_string", Value::String("")},
      {"t.binary_string", Value::String(std::string("a\0b\xff", 4))},
      {"t.empty_array", Value::ArrayOf(VT::kInt32, {})},
      {"t.f32_array", Value::ArrayOf(VT::kFloat32, {Value::Float(VT::kFloat32, 0.25),
                                                    Value::Float(VT::kFloat32, -2)})},
      {"t.bool_array", Value::ArrayOf(VT::kBool, {Value::Bool(true), Value::Bool(false)})},
      {"t.string_array", Value::ArrayOf(VT::kString, {Value::String("a"), Value::String(""),
                                                      Value::String("ccc")})},
  };
  // Arrays of arrays, with inner arrays of different element types and lengths, 3 deep.
  Value inner_a = Value::ArrayOf(VT::kUint16, {Value::Uint(VT::kUint16, 1),
                                               Value::Uint(VT::kUint16, 2)});
  Value inner_b = Value::ArrayOf(VT::kString, {Value::String("x")});
  Value inner_c = Value::ArrayOf(VT::kInt64, {});
  kv.push_back({"t.nested", Value::ArrayOf(VT::kArray, {inner_a, inner_b, inner_c})});
  Value deep = Value::ArrayOf(VT::kArray, {Value::ArrayOf(VT::kArray, {inner_a, inner_c})});
  kv.push_back({"t.nested3", deep});
  std::vector<Value> all_scalars;
  for (int i = 0; i < 5; ++i) all_scalars.push_back(Value::Uint(VT::kUint64, uint64_t{1} << (i * 15)));
  kv.push_back({"t.u64_array", Value::ArrayOf(VT::kUint64, all_scalars)});
  return kv;
}

struct TensorSpec {
  std::string name;
  DType type;
  std::vector<int64_t> ne;
};

const std::vector<TensorSpec> kTensors = {
    {"f32.vec", DType::kF32, {5}},
    {"f16.mat", DType::kF16, {3, 7}},
    {"bf16.mat", DType::kBF16, {4, 2}},
    {"q4_0.mat", DType::kQ4_0, {64, 3}},
    {"q8_0.3d", DType::kQ8_0, {32, 2, 3}},
    {"q4_k.4d", DType::kQ4_K, {256, 2, 1, 2}},
    {"q6_k.mat", DType::kQ6_K, {512, 1}},
    {"i32.vec", DType::kI32, {9}},
    {"empty", DType::kF32, {0, 4}},
    {"scalar", DType::kF32, {}},
};

void CheckRoundTrip(const std::vector<uint8_t>& bytes, uint32_t version, uint64_t alignment) {
  auto file = File::Parse(bytes);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const File& f = **file;
  EXPECT_EQ(f.version(), version);
  EXPECT_EQ(f.alignment(), alignment);
  for (const KeyValue& want : EveryValueType()) {
    const Value* got = f.Find(want.key);
    ASSERT_NE(got, nullptr) << want.key;
    EXPECT_TRUE(*got == want.value) << want.key << ": " << got->ToString() << " vs "
                                    << want.value.ToString();
  }
  ASSERT_EQ(f.tensors().size(), kTensors.size());
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const TensorSpec& spec = kTensors[i];
    const TensorInfo& info = f.tensors()[i];
    EXPECT_EQ(info.name, spec.name);
    EXPECT_EQ(info.type, spec.type);
    EXPECT_EQ(info.ne, spec.ne);
    EXPECT_EQ(info.offset % alignment, 0u);
    auto data = f.TensorData(info);
    const auto want = Pattern(Writer::TensorBytes(spec.type, spec.ne), static_cast<uint8_t>(i));
    EXPECT_TRUE(std::equal(data.begin(), data.end(), want.begin(), want.end())) << spec.name;
  }
}

Writer MakeWriter(uint32_t version, uint64_t alignment, bool streamed) {
  Writer w(version, alignment);
  for (const KeyValue& kv : EveryValueType()) w.Set(kv.key, kv.value);
  for (size_t i = 0; i < kTensors.size(); ++i) {
    const TensorSpec& s = kTensors[i];
    auto data = Pattern(Writer::TensorBytes(s.type, s.ne), static_cast<uint8_t>(i));
    if (streamed) {
      w.AddStreamedTensor(s.name, s.type, s.ne, [data](std::span<uint8_t> out) {
        if (out.size() != data.size()) return Internal("wrong size");
        std::copy(data.begin(), data.end(), out.begin());
        return Status::Ok();
      });
    } else {
      w.AddTensor(s.name, s.type, s.ne, data);
    }
  }
  return w;
}

TEST(GgufWriter, RoundTripEveryValueTypeV3) {
  CheckRoundTrip(MakeWriter(3, 32, false).Serialize(), 3, 32);
}

TEST(GgufWriter, RoundTripV2AndOtherAlignments) {
  for (uint64_t alignment : {1u, 8u, 64u, 4096u}) {
    SCOPED_TRACE(alignment);
    const auto bytes = MakeWriter(2, alignment, false).Serialize();
    CheckRoundTrip(bytes, 2, alignment);
    EXPECT_EQ(File::Parse(bytes).value()->GetUint("general.alignment").value(), alignment);
  }
}

TEST(GgufWriter, StreamedWriteFileMatchesSerialize) {
  const fs::path path = fs::path(::testing::TempDir()) / "gguf_writer_streamed.gguf";
  const Writer streamed = MakeWriter(3, 32, true);
  ASSERT_TRUE(streamed.WriteFile(path.string()).ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> on_disk{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_EQ(on_disk, MakeWriter(3, 32, false).Serialize());
  EXPECT_EQ(on_disk, streamed.Serialize());
  auto file = File::Open(path.string());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->path(), path.string());
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  fs::remove(path);
}

TEST(GgufWriter, FailingFillLeavesNoFile) {
  const fs::path path = fs::path(::testing::TempDir()) / "gguf_writer_fail.gguf";
  fs::remove(path);
  Writer w;
  w.AddStreamedTensor("bad", DType::kF32, {4}, [](std::span<uint8_t>) {
    return IoError("generator broke");
  });
  const Status s = w.WriteFile(path.string());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tensor 'bad': generator broke"), std::string::npos) << s.ToString();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path.string() + ".tmp"));
  EXPECT_FALSE(w.WriteFile("/nonexistent-dir/x.gguf").ok());
}

TEST(GgufWriter, SetReplacesExistingKey) {
  Writer w;
  w.SetString("general.architecture", "llama");
  w.SetUint32("x.n", 1);
  w.SetString("general.architecture", "qwen3");
  auto file = File::Parse(w.Serialize());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->metadata().size(), 2u);
  EXPECT_EQ((*file)->architecture(), "qwen3");
  EXPECT_EQ((*file)->metadata()[0].key, "general.architecture");
}

TEST(GgufWriter, NestedDepthLimit) {
  Writer w;
  Value v = Value::ArrayOf(ValueType::kInt8, {Value::Int(ValueType::kInt8, -1)});
  for (int i = 1; i < 4; ++i) v = Value::ArrayOf(ValueType::kArray, {v});  // 4 levels
  w.Set("deep", v);
  const auto bytes = w.Serialize();
  ReadLimits limits;
  limits.max_array_depth = 4;
  auto ok = File::Parse(bytes, limits);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(*(*ok)->Find("deep") == v);
  limits.max_array_depth = 3;
  auto too_deep = File::Parse(bytes, limits);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_NE(too_deep.status().message().find("key 'deep'"), std::string::npos);
}

// Copying a llama.cpp-written file through Writer must reproduce it byte for byte: this pins
// the writer (and the reader) to the real format, not just to each other.
TEST(GgufWriter, ReserializedFixtureIsByteIdentical) {
  for (const char* name : {"tiny-llama-q4_k_m.gguf", "tiny-qwen3moe-f32.gguf"}) {
    SCOPED_TRACE(name);
    const std::string path = std::string(COHORT_TEST_DATA) + "/fixtures/models/" + name;
    auto file = File::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const File& f = **file;
    Writer w(f.version(), f.alignment());
    for (const KeyValue& kv : f.metadata()) w.Set(kv.key, kv.value);
    for (const TensorInfo& t : f.tensors()) {
      auto data = f.TensorData(t);
      w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
    }
    const auto bytes = w.Serialize();
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> original{std::istreambuf_iterator<char>(in),
                                  std::istreambuf_iterator<char>()};
    ASSERT_EQ(bytes.size(), original.size());
    EXPECT_TRUE(bytes == original);
  }
}

// The fuzzer's property, replayed on its committed seeds (which include past findings): a file
// that parses re-serialises to a file that parses, and that second form is a fixed point.
std::vector<uint8_t> Rewrite(const File& f) {
  Writer w(f.version(), f.alignment());
  for (const KeyValue& kv : f.metadata()) w.Set(kv.key, kv.value);
  for (const TensorInfo& t : f.tensors()) {
    auto data = f.TensorData(t);
    w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  return w.Serialize();
}

TEST(GgufWriter, FuzzSeedsRoundTrip) {
  int parsed = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(COHORT_SOURCE_DIR) / "fuzz/seeds")) {
    SCOPED_TRACE(entry.path().string());
    auto file = File::Open(entry.path().string());
    if (!file.ok()) continue;
    ++parsed;
    const auto once = Rewrite(**file);
    auto again = File::Parse(once);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(Rewrite(**again), once);
  }
  EXPECT_GE(parsed, 4);
}

TEST(GgufWriter, EmptyTensorWithHugeDims) {
  // Found by the fuzzer: the writer's partial product overflowed before reaching the zero.
  EXPECT_EQ(Writer::TensorBytes(DType::kF64, {1, int64_t{1} << 61, 0}), 0u);
  EXPECT_EQ(Writer::TensorBytes(DType::kQ4_0, {64, 3}), 2u * 3u * 18u);
}

TEST(GgufValue, ToString) {
  EXPECT_EQ(Value::Bool(true).ToString(), "true");
  EXPECT_EQ(Value::Int(ValueType::kInt32, -3).ToString(), "-3");
  EXPECT_EQ(Value::String("hi").ToString(), "\"hi\"");
  std::vector<Value> many(20, Value::Uint(ValueType::kUint8, 1));
  EXPECT_EQ(Value::ArrayOf(ValueType::kUint8, many).ToString(), "[20 u8s]");
  EXPECT_EQ(Value::ArrayOf(ValueType::kUint8, {Value::Uint(ValueType::kUint8, 1),
                                               Value::Uint(ValueType::kUint8, 2)})
                .ToString(),
            "[1, 2]");
  EXPECT_EQ(ValueTypeName(ValueType::kFloat64), "f64");
}

}  // namespace
}  // namespace cohort::gguf
