// Internal interface between the public quant.h dispatcher and the per-ISA kernel files:
// the scalar reference (kept forever, the yardstick for every SIMD kernel) and the SIMD
// kernel tables. Not for use outside src/kernels and its tests.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace cohort::kernels {

// Round to nearest, ties to even, as ggml's nearest_int: exact for |x| < 2^22, which all
// callers guarantee (quantized values are at most a few hundred).
inline int NearestInt(float x) {
  const float shifted = x + 12582912.f;  // 1.5 * 2^23 puts the integer in the low mantissa
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

namespace ref {

// Legacy block types (32 elements) and plain types: quant_ref_legacy.cc.
void DequantizeLegacyRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeLegacyRow(DType type, const float* src, void* dst, int64_t n);
VecDotFn GetLegacyVecDot(DType weight);  // nullptr if `weight` is not a legacy/plain type

// K-quants (256-element super-blocks): quant_ref_k.cc.
void DequantizeKRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeKRow(DType type, const float* src, void* dst, int64_t n);
VecDotFn GetKVecDot(DType weight);  // nullptr if `weight` is not a K-quant

bool IsKType(DType type);

// MXFP4 (32-element blocks, E8M0 scale): quant_ref_mxfp4.cc.
void DequantizeMxfp4Row(const void* src, float* dst, int64_t n);
void QuantizeMxfp4Row(const float* src, void* dst, int64_t n);
// ggml's generic ggml_vec_dot_mxfp4_q8_0: per block d * (low-half sum + high-half sum), summed.
float VecDotMxfp4Q8_0(const void* w, const void* a, int64_t n);
// The order of llama.cpp's AVX2 repacked MXFP4 GEMV/GEMM (mxfp4_8x8, which takes every matrix
// with a multiple of 8 rows, experts included): acc = fma(block sum, scale_w * d_a, acc).
float VecDotMxfp4Q8_0Repacked(const void* w, const void* a, int64_t n);

}  // namespace ref

// SIMD kernel tables: nullptr where a level has no kernel of its own for that type.
namespace avx2 {
VecDotFn GetVecDot(DType weight);   // vec_dot_avx2.cc: plain and legacy types
VecDotFn GetKVecDot(DType weight);  // vec_dot_avx2_k.cc: K-quants
VecDotFn GetKVecDotGrouped(DType weight);  // the same, in llama.cpp's repacked-GEMM order
VecDotFn GetMxfp4VecDot();  // vec_dot_avx2_mxfp4.cc: in ref::VecDotMxfp4Q8_0Repacked's order
}
namespace neon {
VecDotFn GetVecDot(DType weight);  // vec_dot_neon.cc: Q4_0, Q8_0, Q4_K, Q6_K (AArch64 dotprod)
VecDotFn GetVecDotGrouped(DType weight);  // the same, Q4_K in llama.cpp's repacked-GEMM order
}
namespace avx512 {
VecDotFn GetVecDot(DType weight);
// quantize_avx512.cc: Q8_0 and Q8_1 rows (ref::QuantizeLegacyRow's bytes); false for others.
bool QuantizeRow(DType type, const float* src, void* dst, int64_t n);
}

}  // namespace cohort::kernels
