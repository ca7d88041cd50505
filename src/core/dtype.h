// Tensor element types, numbered as GGUF/ggml number them, with their block geometry.
// A quantized type stores `block_size` elements in `type_size` bytes; a row of n elements
// (n a multiple of block_size) takes n / block_size * type_size bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cohort {

enum class DType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,  // 2.06 bits: per 8 values an index into a 256-point grid, 7 sign bits; 4-bit scales per 32
  kIQ2_XS = 17,  // 2.31 bits: per 8 values a 9-bit index into a 512-point grid and 7 sign bits; 4-bit scales per 16
  kIQ3_XXS = 18,  // 3.06 bits: per 4 values an index into a 256-point grid; IQ2_XXS's signs and scales
  kIQ1_S = 19,  // 1.56 bits: per 8 values an 11-bit index into a {-1,0,1}^8 grid; 3-bit scale, +-1/8 delta per 32
  kIQ4_NL = 20,  // 32 values, 4-bit indices into a fixed non-linear table, one fp16 scale
  kIQ3_S = 21,   // 3.44 bits: 9-bit indices into a 512-point grid per 4 values, free signs, 4-bit scales
  kIQ2_S = 22,  // 2.56 bits: per 8 values a 10-bit index into a 1024-point grid and 8 sign bits; 4-bit scales per 16
  kIQ4_XS = 23,  // IQ4_NL's table in 256-value super-blocks with 6-bit scales per 32
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,  // 1.75 bits: IQ1_S's grid, a delta per 8 values, 3-bit scales per 16 (fp16 scale spread over them)
  kBF16 = 30,
  kTQ1_0 = 34,  // ternary (BitNet b1.58): 5 trits per byte in base 3, one fp16 scale per 256
  kTQ2_0 = 35,  // ternary: 2 bits per value (0, 1, 2 for -1, 0, +1), one fp16 scale per 256
  kMXFP4 = 39,  // OCP microscaling FP4: 32 e2m1 values sharing an E8M0 exponent (gpt-oss)
};

struct DTypeTraits {
  DType type;
  std::string_view name;  // as llama.cpp prints it: "f32", "q4_K", ...
  int64_t block_size;     // elements per block (1 for plain types)
  int64_t type_size;      // bytes per block
  bool quantized;
};

// Traits of a known type; nullopt for ids this build does not know (a GGUF may carry any id).
std::optional<DTypeTraits> FindDType(uint32_t id);
// Traits of a type known to be valid (checked).
const DTypeTraits& Traits(DType type);
std::string_view DTypeName(DType type);
// Parses "f32", "q4_0", "Q4_K", "q4_k_m"-style names are not types; returns nullopt.
std::optional<DType> ParseDType(std::string_view name);

// Bytes of a row of n elements; n must be a multiple of the block size (checked).
int64_t RowBytes(DType type, int64_t n);

}  // namespace cohort
