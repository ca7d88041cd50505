// libFuzzer target for the GGUF reader: parses arbitrary bytes, touches everything a parse
// exposes, and checks that a file that parses survives a Writer round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/check.h"
#include "gguf/gguf.h"
#include "gguf/writer.h"

namespace cohort::gguf {
namespace {

// Small limits keep each input cheap while still exercising every limit check.
ReadLimits FuzzLimits() {
  ReadLimits limits;
  limits.max_tensors = 1024;
  limits.max_kv = 1024;
  limits.max_string_bytes = 1 << 16;
  limits.max_array_elements = 1 << 16;
  limits.max_total_array_elements = 1 << 18;
  return limits;
}

std::vector<uint8_t> Rewrite(const File& f) {
  Writer w(f.version(), f.alignment());
  for (const KeyValue& kv : f.metadata()) w.Set(kv.key, kv.value);
  for (const TensorInfo& t : f.tensors()) {
    auto data = f.TensorData(t);
    w.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  return w.Serialize();
}

void Exercise(const File& f) {
  uint64_t sum = 0;
  for (const KeyValue& kv : f.metadata()) {
    sum += kv.value.ToString().size();
    COHORT_CHECK(f.Find(kv.key) == &kv.value);
    (void)f.GetInt(kv.key);
    (void)f.GetUint(kv.key);
    (void)f.GetFloat(kv.key);
    (void)f.GetBool(kv.key, false);
    (void)f.GetString(kv.key, "");
    (void)f.GetArray(kv.key);
  }
  for (const TensorInfo& t : f.tensors()) {
    COHORT_CHECK(f.FindTensor(t.name) == &t);
    COHORT_CHECK(t.n_elements() >= 0 && t.n_rows() >= 0);
    for (uint8_t b : f.TensorData(t)) sum += b;  // every byte must be readable
    if (t.n_bytes > 0) sum += f.TensorBytes(t, t.n_bytes / 2, t.n_bytes).size();
  }
  (void)f.architecture();
  volatile uint64_t sink = sum;
  (void)sink;
}

}  // namespace
}  // namespace cohort::gguf

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cohort::gguf;
  auto parsed = File::Parse(std::span<const uint8_t>(data, size), FuzzLimits());
  if (!parsed.ok()) {
    COHORT_CHECK(!parsed.status().message().empty());
    return 0;
  }
  Exercise(**parsed);
  // A legal but huge alignment (with no tensors) would make the writer pad to it; that costs
  // memory, not coverage, so skip the round trip there.
  if ((*parsed)->alignment() > (1u << 16)) return 0;
  // A parsed file re-serialises to a file that parses, and that second form is a fixed point.
  const std::vector<uint8_t> once = Rewrite(**parsed);
  auto reparsed = File::Parse(once, FuzzLimits());
  COHORT_CHECK(reparsed.ok());
  COHORT_CHECK((*reparsed)->tensors().size() == (*parsed)->tensors().size());
  COHORT_CHECK((*reparsed)->metadata().size() == (*parsed)->metadata().size());
  COHORT_CHECK(Rewrite(**reparsed) == once);
  return 0;
}
