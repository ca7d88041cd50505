// ImportanceMatrix::Load; see imatrix.h.
#include "gguf/imatrix.h"

#include <cstring>

#include "gguf/gguf.h"

namespace cohort::gguf {
namespace {

constexpr std::string_view kSums = ".in_sum2";
constexpr std::string_view kCounts = ".counts";

std::vector<float> Floats(const File& file, const TensorInfo& t) {
  const std::span<const uint8_t> bytes = file.TensorData(t);
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

Result<ImportanceMatrix> ImportanceMatrix::Load(const std::string& path) {
  auto file = File::Open(path);
  if (!file.ok()) {
    return InvalidArgument(path + ": not an importance matrix GGUF (" + file.status().message() +
                           "); llama-imatrix's legacy .dat files are not read");
  }
  ImportanceMatrix m;
  for (const TensorInfo& sums : (*file)->tensors()) {
    if (sums.name.size() <= kSums.size() || !sums.name.ends_with(kSums)) continue;
    const std::string name = sums.name.substr(0, sums.name.size() - kSums.size());
    const TensorInfo* counts = (*file)->FindTensor(name + std::string(kCounts));
    if (counts == nullptr) return InvalidArgument(path + ": " + sums.name + " has no " + name + std::string(kCounts));
    if (sums.type != DType::kF32 || counts->type != DType::kF32) {
      return InvalidArgument(path + ": " + name + "'s sums and counts must be F32");
    }
    const int64_t n_mat = counts->n_elements();
    if (n_mat <= 0 || sums.n_elements() % n_mat != 0) {
      return InvalidArgument(path + ": " + name + " has " + std::to_string(sums.n_elements()) + " sums for " +
                             std::to_string(n_mat) + " counts");
    }
    const int64_t ne0 = sums.n_elements() / n_mat;
    std::vector<float> values = Floats(**file, sums);
    const std::vector<float> n_tokens = Floats(**file, *counts);
    for (int64_t e = 0; e < n_mat; ++e) {
      for (int64_t i = 0; i < ne0; ++i) {
        float& v = values[static_cast<size_t>(e * ne0 + i)];
        v = n_tokens[static_cast<size_t>(e)] > 0 ? v / n_tokens[static_cast<size_t>(e)] : 1.0f;
      }
    }
    m.entries_[name] = std::move(values);
  }
  if (m.entries_.empty()) return InvalidArgument(path + ": no importance data (no *.in_sum2 tensors)");
  return m;
}

const std::vector<float>* ImportanceMatrix::Find(const std::string& name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

}  // namespace cohort::gguf
