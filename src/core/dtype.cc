// The table of element types and their block geometry.
#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "core/check.h"

namespace cohort {
namespace {

constexpr DTypeTraits kTypes[] = {
    {DType::kF32, "f32", 1, 4, false},
    {DType::kF16, "f16", 1, 2, false},
    {DType::kQ4_0, "q4_0", 32, 18, true},
    {DType::kQ4_1, "q4_1", 32, 20, true},
    {DType::kQ5_0, "q5_0", 32, 22, true},
    {DType::kQ5_1, "q5_1", 32, 24, true},
    {DType::kQ8_0, "q8_0", 32, 34, true},
    {DType::kQ8_1, "q8_1", 32, 36, true},
    {DType::kQ2_K, "q2_K", 256, 84, true},
    {DType::kQ3_K, "q3_K", 256, 110, true},
    {DType::kQ4_K, "q4_K", 256, 144, true},
    {DType::kQ5_K, "q5_K", 256, 176, true},
    {DType::kQ6_K, "q6_K", 256, 210, true},
    {DType::kQ8_K, "q8_K", 256, 292, true},
    {DType::kIQ2_XXS, "iq2_xxs", 256, 66, true},
    {DType::kIQ2_XS, "iq2_xs", 256, 74, true},
    {DType::kIQ3_XXS, "iq3_xxs", 256, 98, true},
    {DType::kIQ1_S, "iq1_s", 256, 50, true},
    {DType::kIQ4_NL, "iq4_nl", 32, 18, true},
    {DType::kIQ3_S, "iq3_s", 256, 110, true},
    {DType::kIQ2_S, "iq2_s", 256, 82, true},
    {DType::kIQ4_XS, "iq4_xs", 256, 136, true},
    {DType::kI8, "i8", 1, 1, false},
    {DType::kI16, "i16", 1, 2, false},
    {DType::kI32, "i32", 1, 4, false},
    {DType::kI64, "i64", 1, 8, false},
    {DType::kF64, "f64", 1, 8, false},
    {DType::kIQ1_M, "iq1_m", 256, 56, true},
    {DType::kBF16, "bf16", 1, 2, false},
    {DType::kTQ1_0, "tq1_0", 256, 54, true},
    {DType::kTQ2_0, "tq2_0", 256, 66, true},
    {DType::kMXFP4, "mxfp4", 32, 17, true},
};

}  // namespace

std::optional<DTypeTraits> FindDType(uint32_t id) {
  for (const DTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return t;
  }
  return std::nullopt;
}

const DTypeTraits& Traits(DType type) {
  for (const DTypeTraits& t : kTypes) {
    if (t.type == type) return t;
  }
  COHORT_CHECK(false && "unknown DType");
  __builtin_unreachable();
}

std::string_view DTypeName(DType type) { return Traits(type).name; }

std::optional<DType> ParseDType(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const DTypeTraits& t : kTypes) {
    std::string candidate(t.name);
    for (char& c : candidate) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (candidate == lower) return t.type;
  }
  return std::nullopt;
}

int64_t RowBytes(DType type, int64_t n) {
  const DTypeTraits& t = Traits(type);
  COHORT_CHECK_EQ(n % t.block_size, 0);
  return n / t.block_size * t.type_size;
}

}  // namespace cohort
