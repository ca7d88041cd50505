// Internal interface of the ternary types TQ1_0 and TQ2_0 (GGML types 34 and 35, BitNet b1.58
// and TriLM weights: values d * {-1, 0, +1} in 256-value blocks, dotted with Q8_K rows): the
// scalar reference in its three orders (quant_ref_tq.cc) and the SIMD kernel tables
// (vec_dot_avx2_tq.cc, vec_dot_neon_tq.cc). Like quant_internal.h, not for use outside
// src/kernels and its tests; quant.cc dispatches to it.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/quant.h"

namespace cohort::kernels {

namespace ref {

bool IsTernaryType(DType type);
void DequantizeTernaryRow(DType type, const void* src, float* dst, int64_t n);
// ggml's quantize_row_tq1_0_ref / quantize_row_tq2_0_ref (the only quantizer llama-quantize
// has for these types: no importance matrix), byte for byte.
void QuantizeTernaryRow(DType type, const float* src, void* dst, int64_t n);

// ggml's generic ggml_vec_dot_tq{1,2}_0_q8_K: per block the exact integer sum of (t) * q,
// sumf += sum * (d_w * d_a). For tests: the same sum as the orders below, other roundings.
VecDotFn GetTernaryVecDot(DType weight);
// llama.cpp's x86 kernels (AVX2, which its AVX-512 builds run too; no repack, llamafile or
// panel path takes these types, so a batch is this vec-dot per row and token): the trits as
// unsigned 0..2 by maddubs, the activations' block sums subtracted per 16-bit lane, 8 int
// lanes (lane m: bytes 4m..4m+3 of every 32 values, less bsums[2m] + bsums[2m + 1]), one
// fma per block with d_a * d_w into 8 float lanes (GCC contracts the source's mul + add),
// reduced as hsum_float_8. Every x86 level follows it.
VecDotFn GetTernaryX86OrderVecDot(DType weight);
// llama.cpp's ARM NEON kernels (dotprod): per block the exact integer sum less the block sums,
// sumf = fma(d_w * d_a, sum, sumf) (as GCC and Clang contract `sumf += d * sum`). aarch64
// builds run it at every level.
VecDotFn GetTernaryArmOrderVecDot(DType weight);

}  // namespace ref

namespace avx2 {
// vec_dot_avx2_tq.cc: bit for bit ref::GetTernaryX86OrderVecDot's; nullptr off x86.
VecDotFn GetTernaryVecDot(DType weight);
}
namespace neon {
// vec_dot_neon_tq.cc: bit for bit ref::GetTernaryArmOrderVecDot's; nullptr off AArch64.
VecDotFn GetTernaryVecDot(DType weight);
}

}  // namespace cohort::kernels
