// llama.cpp's x86 panel GEMM for the i-quants (ggml-cpu/iqp.cpp), which takes every batch of
// >= 8 tokens: each super-block of 256 weights decoded once into int8 values, integer scales
// per 16 values and one float factor, then integer dot products with the Q8_K activations,
// per super-block sum = exact integer, acc = fma(float(sum), dfac * d_y, acc). The integer sum
// does not depend on how it is computed, so the decode can be shared by many tokens and the
// products run as VNNI dot products, and the result stays bit-identical to
// ref::GetIqX86OrderVecDotGrouped (quant_internal.h), the per-(row, token) statement of it.
// Internal to src/kernels.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace cohort::kernels {

// One super-block as iqp.cpp decodes it: weight j = dfac * iscales[j / 16] * vals[j], bit for
// bit the dequantized value; |vals| <= 127.
struct IqDecoded {
  int8_t vals[256];
  int8_t iscales[16];
  float dfac;
};
using IqDecodeFn = void (*)(const uint8_t* block, IqDecoded* out);

// The decoder of a type iqp.cpp takes (IQ2_XXS, IQ4_XS, ...), nullptr for the others.
IqDecodeFn GetIqPanelDecode(DType weight);

// A panel: 16 rows' super-blocks decoded, super-block by super-block. Each takes
// kIqPanelBlockBytes: the rows' dfac (16 floats), their iscales (16 sub-blocks x 16 rows),
// then for each group of 4 values the rows' 4 bytes as 16 32-bit lanes (a row per lane, as
// dpbusd takes them), each byte the value + 128.
inline constexpr int kIqPanelRows = 16;
inline constexpr int kIqPanelTokens = 8;  // the most tokens one IqPanelDot call takes
inline constexpr int64_t kIqPanelBlockBytes = 64 + 256 + 64 * 64;
inline constexpr int64_t kIqPanelDfacOffset = 0;
inline constexpr int64_t kIqPanelScalesOffset = 64;
inline constexpr int64_t kIqPanelQuantsOffset = 64 + 256;
inline int64_t IqPanelBytes(int64_t n) { return n / 256 * kIqPanelBlockBytes; }

// DecodeIqPanel (below) in portable code, for the levels without AVX-512: the same panel.
void DecodeIqPanelPortable(IqDecodeFn decode, int64_t block_bytes, const uint8_t* w, int64_t w_stride, int64_t n,
                           uint8_t* panel);

namespace avx2 {
// avx512::IqPanelDot's sums at the AVX2 level (8 rows per register, twice), with AVX-VNNI's
// dpbusd where `vnni`, else sign-moved maddubs of |value|: the same exact integers, the same bits.
void IqPanelDot(const uint8_t* panel, const uint8_t* act, int64_t act_stride, int n_tokens, int64_t n, float* out,
                int64_t out_stride, bool vnni);
}  // namespace avx2

namespace avx512 {
// Decodes 16 rows of n elements (row r at w + r * w_stride, block_bytes per super-block) into
// `panel` (IqPanelBytes(n) bytes, 64-byte aligned).
void DecodeIqPanel(IqDecodeFn decode, int64_t block_bytes, const uint8_t* w, int64_t w_stride, int64_t n,
                   uint8_t* panel);
// The same for 16 IQ4_XS rows that PackRows packed (pack.h; `group`: their first super-block),
// in vector code: the packed quant words are the panel's lanes already, each nibble looked up.
void DecodeIq4XsPackedPanel(const uint8_t* group, int64_t n, uint8_t* panel);
// out[t * out_stride + r] = the panel order's dot of row r with Q8_K activation row t (at
// act + t * act_stride), r < 16, t < n_tokens <= kIqPanelTokens.
void IqPanelDot(const uint8_t* panel, const uint8_t* act, int64_t act_stride, int n_tokens, int64_t n,
                float* out, int64_t out_stride);
}  // namespace avx512

}  // namespace cohort::kernels
