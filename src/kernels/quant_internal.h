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

// x86's product of a weight w and an activation q (mul_add_epi8, or maddubs of the magnitudes
// with the signs moved onto q by sign_epi8): the sign moves onto q in 8 bits, so q = -128 times
// a negative w wraps to |w| * -128. Q8_K rows hold a -128 in every block (their largest
// magnitude), so this decides real bits.
inline int X86Product(int w, int q) {
  const int moved = w < 0 ? static_cast<int8_t>(-q) : q;
  return (w < 0 ? -w : w) * moved;
}

// hsum_float_8 of ggml's x86 code: lanes m and m + 4, then (0 + 2) + (1 + 3).
inline float X86HorizontalSum8(const float* lanes) {
  const float s0 = lanes[0] + lanes[4], s1 = lanes[1] + lanes[5], s2 = lanes[2] + lanes[6], s3 = lanes[3] + lanes[7];
  return (s0 + s2) + (s1 + s3);
}

// Legacy block types (32 elements) and plain types: quant_ref_legacy.cc.
void DequantizeLegacyRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeLegacyRow(DType type, const float* src, void* dst, int64_t n);
VecDotFn GetLegacyVecDot(DType weight);  // nullptr if `weight` is not a legacy/plain type

// K-quants (256-element super-blocks): quant_ref_k.cc.
void DequantizeKRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeKRow(DType type, const float* src, void* dst, int64_t n);
VecDotFn GetKVecDot(DType weight);  // nullptr if `weight` is not a K-quant

bool IsKType(DType type);

// One K-quant super-block in integer form: a quant per element (signed for Q3_K/Q6_K), an
// integer scale and min per sub-block (16 of 16 elements, or 8 of 32 for Q4_K/Q5_K), and the
// two fp16 super scales as floats.
struct UnpackedK {
  int8_t q[256];
  int scale[16];
  int min[16];
  float d = 0;
  float dmin = 0;
};
void UnpackK(DType type, const uint8_t* block, UnpackedK* u);

// The vec-dots in the order of llama.cpp's x86 CPU backend (AVX2, and AVX-512, whose
// builds take the same kernels for these types), in portable scalar code: quant_ref_x86.cc.
// x86 builds run them at the scalar level, so that every x86 path gives the same bits and
// the goldens (made by x86 llama.cpp) hold at each. nullptr for types it does not cover.
VecDotFn GetX86OrderVecDot(DType weight);
VecDotFn GetX86OrderVecDotGrouped(DType weight);  // Q4_K in the repacked-GEMM order

// MXFP4 (32-element blocks, E8M0 scale): quant_ref_mxfp4.cc.
void DequantizeMxfp4Row(const void* src, float* dst, int64_t n);
void QuantizeMxfp4Row(const float* src, void* dst, int64_t n);
// ggml's generic ggml_vec_dot_mxfp4_q8_0: per block d * (low-half sum + high-half sum), summed.
float VecDotMxfp4Q8_0(const void* w, const void* a, int64_t n);
// The order of llama.cpp's AVX2 repacked MXFP4 GEMV/GEMM (mxfp4_8x8, which takes every matrix
// with a multiple of 8 rows, experts included): acc = fma(block sum, scale_w * d_a, acc).
float VecDotMxfp4Q8_0Repacked(const void* w, const void* a, int64_t n);

// IQ4_NL and IQ4_XS (the 4-bit non-linear i-quants): quant_ref_iq.cc.
bool IsIqType(DType type);
void DequantizeIqRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeIqRow(DType type, const float* src, void* dst, int64_t n);  // ggml's, no imatrix
// IQ4_NL, IQ4_XS: ggml's quantizer, weighing errors by `importance` (per value, or null).
void QuantizeIq4Row(DType type, const float* src, void* dst, int64_t n, const float* importance);
// ggml's generic order (for tests: the same sum, other roundings); nullptr for other types.
VecDotFn GetIqVecDot(DType weight);
// llama.cpp's x86 order (AVX2 and AVX-512 builds), which every level follows for these types.
VecDotFn GetIqX86OrderVecDot(DType weight);
// The same for batches of GroupedTokens (quant.h): IQ4_XS in the order of llama.cpp's x86
// panel GEMM (iqp.cpp, AVX-512 VNNI build), IQ4_NL as GetIqX86OrderVecDot.
VecDotFn GetIqX86OrderVecDotGrouped(DType weight);

// The grid i-quants (IQ2_XXS): quant_ref_iq2.cc; reached through the IQ functions above.
bool IsIqGridType(DType type);
void DequantizeIqGridRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeIqGridRow(DType type, const float* src, void* dst, int64_t n);  // simple, valid blocks
VecDotFn GetIqGridVecDot(DType weight);                 // ggml's generic order
VecDotFn GetIqGridX86OrderVecDot(DType weight);         // llama.cpp's x86 vec-dot
VecDotFn GetIqGridX86OrderVecDotGrouped(DType weight);  // its x86 panel GEMM (iqp.cpp)
// llama.cpp's ARM NEON vec-dot, which aarch64 builds run at every level (llama.cpp's ARM build
// has no panel GEMM: batches take the same order). nullptr for types that follow x86's on ARM.
VecDotFn GetIqGridArmOrderVecDot(DType weight);

// IQ2_XS and IQ2_S (scales per 16 values): quant_ref_iq2s.cc, in the same four orders; reached
// through the grid functions above.
bool IsIq2sType(DType type);
void DequantizeIq2sRow(DType type, const void* src, float* dst, int64_t n);
void QuantizeIq2sRow(DType type, const float* src, void* dst, int64_t n);  // simple, valid blocks
VecDotFn GetIq2sVecDot(DType weight);
VecDotFn GetIq2sX86OrderVecDot(DType weight);
VecDotFn GetIq2sX86OrderVecDotGrouped(DType weight);
VecDotFn GetIq2sArmOrderVecDot(DType weight);
// IQ1_S and IQ1_M: quant_ref_iq1.cc; reached through the grid functions above, in the same four
// orders (ggml's generic one, llama.cpp's x86 vec-dot and panel GEMM, its ARM NEON vec-dot).
bool IsIq1Type(DType type);
void DequantizeIq1Row(DType type, const void* src, float* dst, int64_t n);
void QuantizeIq1Row(DType type, const float* src, void* dst, int64_t n);  // simple, valid blocks
VecDotFn GetIq1VecDot(DType weight);
VecDotFn GetIq1X86OrderVecDot(DType weight);
VecDotFn GetIq1X86OrderVecDotGrouped(DType weight);
VecDotFn GetIq1ArmOrderVecDot(DType weight);
// IQ3_XXS and IQ3_S: quant_ref_iq3.cc, reached through the IQ functions above; the same four
// orders as the grid types' (nullptr for other types).
bool IsIq3Type(DType type);
void DequantizeIq3Row(DType type, const void* src, float* dst, int64_t n);
void QuantizeIq3Row(DType type, const float* src, void* dst, int64_t n);  // simple, valid blocks
VecDotFn GetIq3VecDot(DType weight);                 // ggml's generic order
VecDotFn GetIq3X86OrderVecDot(DType weight);         // llama.cpp's x86 vec-dot
VecDotFn GetIq3X86OrderVecDotGrouped(DType weight);  // its x86 panel GEMM (iqp.cpp)
VecDotFn GetIq3ArmOrderVecDot(DType weight);         // its ARM NEON vec-dot, every aarch64 level

}  // namespace ref

// SIMD kernel tables: nullptr where a level has no kernel of its own for that type.
namespace avx2 {
VecDotFn GetVecDot(DType weight);   // vec_dot_avx2.cc: plain and legacy types
VecDotFn GetKVecDot(DType weight);  // vec_dot_avx2_k.cc: K-quants
VecDotFn GetKVecDotGrouped(DType weight);  // the same, in llama.cpp's repacked-GEMM order
VecDotFn GetMxfp4VecDot();  // vec_dot_avx2_mxfp4.cc: in ref::VecDotMxfp4Q8_0Repacked's order
VecDotFn GetIqVecDot(DType weight);  // vec_dot_avx2_iq.cc: in ref::GetIqX86OrderVecDot's order
VecDotFn GetIqVecDotGrouped(DType weight);  // the same, ref::GetIqX86OrderVecDotGrouped's
VecDotFn GetIqGridVecDot(DType weight);  // vec_dot_avx2_iq2.cc: ref::GetIqGridX86OrderVecDot's order
VecDotFn GetIqGridVecDotGrouped(DType weight);  // the same, ref::GetIqGridX86OrderVecDotGrouped's
VecDotFn GetIq2sVecDot(DType weight);  // vec_dot_avx2_iq2s.cc: ref::GetIq2sX86OrderVecDot's order
VecDotFn GetIq2sVecDotGrouped(DType weight);  // the same, ref::GetIq2sX86OrderVecDotGrouped's
VecDotFn GetIq1VecDot(DType weight);  // vec_dot_avx2_iq1.cc: ref::GetIq1X86OrderVecDot's order
VecDotFn GetIq1VecDotGrouped(DType weight);  // the same, ref::GetIq1X86OrderVecDotGrouped's
VecDotFn GetIq3VecDot(DType weight);  // vec_dot_avx2_iq3.cc: ref::GetIq3X86OrderVecDot's order
VecDotFn GetIq3VecDotGrouped(DType weight);  // the same, ref::GetIq3X86OrderVecDotGrouped's
}
namespace neon {
VecDotFn GetVecDot(DType weight);  // vec_dot_neon.cc: Q4_0, Q8_0, Q4_K, Q6_K (AArch64 dotprod)
VecDotFn GetVecDotGrouped(DType weight);  // the same, Q4_K in llama.cpp's repacked-GEMM order
VecDotFn GetIqVecDot(DType weight);  // vec_dot_neon_iq.cc: in ref::GetIqX86OrderVecDot's order
VecDotFn GetIqVecDotGrouped(DType weight);  // the same, ref::GetIqX86OrderVecDotGrouped's
VecDotFn GetIqGridVecDot(DType weight);  // vec_dot_neon_iq2.cc: in ref::GetIqGridArmOrderVecDot's order
VecDotFn GetIq2sVecDot(DType weight);  // vec_dot_neon_iq2s.cc: in ref::GetIq2sArmOrderVecDot's order
VecDotFn GetIq1VecDot(DType weight);  // vec_dot_neon_iq1.cc: in ref::GetIq1ArmOrderVecDot's order
VecDotFn GetIq3VecDot(DType weight);  // vec_dot_neon_iq3.cc: in ref::GetIq3ArmOrderVecDot's order
}
namespace avx512 {
VecDotFn GetVecDot(DType weight);
// quantize_avx512.cc: Q8_0 and Q8_1 rows (ref::QuantizeLegacyRow's bytes); false for others.
bool QuantizeRow(DType type, const float* src, void* dst, int64_t n);
VecDotFn GetIqVecDot(DType weight);  // vec_dot_avx512_iq.cc: in ref::GetIqX86OrderVecDot's order
VecDotFn GetIqVecDotGrouped(DType weight);  // the same, ref::GetIqX86OrderVecDotGrouped's
}

}  // namespace cohort::kernels
