// Helpers shared by the kernel tests: seeded random rows, byte buffers that start at a chosen
// misalignment, and the float dot product of two dequantized rows (the slow reference).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace cohort::kernels::testing {

inline std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> row(static_cast<size_t>(n));
  for (float& v : row) v = dist(rng);
  return row;
}

// A row of `type` whose first byte sits `offset` bytes past a 64-byte boundary.
class MisalignedRow {
 public:
  MisalignedRow(DType type, int64_t n, int offset)
      : storage_(static_cast<size_t>(RowBytes(type, n) + 128)), offset_(offset) {}
  uint8_t* data() {
    const auto base = reinterpret_cast<uintptr_t>(storage_.data());
    return storage_.data() + ((64 - base % 64) % 64) + offset_;
  }

 private:
  std::vector<uint8_t> storage_;
  int offset_;
};

inline std::vector<float> Dequantized(DType type, const void* row, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  DequantizeRow(type, row, out.data(), n);
  return out;
}

// sum a[i]*b[i] and sum |a[i]*b[i]| in double.
struct DotResult {
  double dot = 0;
  double abs_sum = 0;
};
inline DotResult FloatDot(const std::vector<float>& a, const std::vector<float>& b) {
  DotResult r;
  for (size_t i = 0; i < a.size(); ++i) {
    const double p = static_cast<double>(a[i]) * b[i];
    r.dot += p;
    r.abs_sum += std::fabs(p);
  }
  return r;
}

inline const DType kWeightTypes[] = {
    DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0, DType::kQ4_1,
    DType::kQ5_0, DType::kQ5_1, DType::kQ8_0, DType::kQ2_K, DType::kQ3_K,
    DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS, DType::kIQ2_XXS, DType::kMXFP4,
    DType::kTQ1_0, DType::kTQ2_0, DType::kIQ2_XS, DType::kIQ2_S, DType::kIQ1_S, DType::kIQ1_M,
    DType::kIQ3_XXS, DType::kIQ3_S};

}  // namespace cohort::kernels::testing
