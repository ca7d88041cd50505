// The codebooks of the grid i-quants (IQ2_XXS, ...) and the decoding of their blocks into signed
// int8 values, shared by the scalar reference and the SIMD kernels. Internal to kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.h"

namespace cohort::kernels {

// 8 magnitudes per entry, one byte each (value j in byte j): iq_grids.cc.
extern const uint64_t kIq2XxsGrid[256];

// The 8 signs of a group from its 7 stored bits: the 8th makes the count of minus signs even
// (ggml's ksigns_iq2xs). Bit j set: value j is negative.
inline uint8_t Iq2Signs(uint32_t seven_bits) {
  return static_cast<uint8_t>(seven_bits | ((__builtin_popcount(seven_bits) & 1) << 7));
}

// For each 7 stored sign bits, the 8 signs as bytes (0x01 for plus, 0xff for minus, value j in
// byte j): the multipliers x86's sign_epi8 and ARM's vmulq_s8 take (ggml's keven_signs_q2xs).
inline constexpr struct Iq2SignBytesTable {
  uint64_t bytes[128];
  constexpr Iq2SignBytesTable() : bytes() {
    for (uint32_t i = 0; i < 128; ++i) {
      const uint32_t signs = i | ((__builtin_popcount(i) & 1) << 7);
      for (int j = 0; j < 8; ++j) bytes[i] |= uint64_t{(signs >> j) & 1 ? 0xffu : 0x01u} << (8 * j);
    }
  }
} kIq2SignBytes;

// Sub-block ib32 (values 32 * ib32 .. + 31) of an IQ2_XXS block, as its two words.
struct Iq2XxsWords {
  uint32_t grid;   // 4 grid indices, group l in byte l
  uint32_t signs;  // group l's 7 sign bits at bit 7 * l; the scale ls in bits 28..31
};
inline Iq2XxsWords Iq2XxsSubBlock(const BlockIq2Xxs& b, int ib32) {
  Iq2XxsWords w;
  std::memcpy(&w.grid, b.qs + 8 * ib32, 4);
  std::memcpy(&w.signs, b.qs + 8 * ib32 + 4, 4);
  return w;
}

// The 32 values of a sub-block as signed integers (grid magnitude with its sign, |v| <= 43),
// and the integer scale 2 * ls + 1 they share: value = d / 8 * scale * v.
inline int DecodeIq2XxsSubBlock(const BlockIq2Xxs& b, int ib32, int8_t* v) {
  const Iq2XxsWords w = Iq2XxsSubBlock(b, ib32);
  for (int l = 0; l < 4; ++l) {
    const uint64_t grid = kIq2XxsGrid[(w.grid >> (8 * l)) & 0xff];
    const uint8_t signs = Iq2Signs((w.signs >> (7 * l)) & 127);
    for (int j = 0; j < 8; ++j) {
      const int m = static_cast<int>((grid >> (8 * j)) & 0xff);
      v[8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -m : m);
    }
  }
  return 2 * static_cast<int>(w.signs >> 28) + 1;
}

}  // namespace cohort::kernels
