// The codebooks of IQ3_XXS and IQ3_S and the decoding of their sub-blocks into signed int8
// values, shared by the scalar reference and the SIMD kernels. Internal to kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"

namespace cohort::kernels {

// 4 magnitudes per entry, one byte each (value j in byte j): iq3_grids.cc.
extern const uint32_t kIq3XxsGrid[256];
extern const uint32_t kIq3SGrid[512];

// For each sign byte of IQ3_S (bit j set: value j negative), the 8 multipliers as bytes (0x01
// for plus, 0xff for minus, value j in byte j), the form x86's sign_epi8 and ARM's vmulq_s8 take.
inline constexpr struct Iq3SSignBytesTable {
  uint64_t bytes[256];
  constexpr Iq3SSignBytesTable() : bytes() {
    for (uint32_t i = 0; i < 256; ++i) {
      for (int j = 0; j < 8; ++j) bytes[i] |= uint64_t{(i >> j) & 1 ? 0xffu : 0x01u} << (8 * j);
    }
  }
} kIq3SSignBytes;

// Sub-block ib32 (values 32 * ib32 .. + 31) of an IQ3_XXS block: its 8 grid indices (4 values
// each) and its word of 4 x 7 sign bits with the scale ls in bits 28..31.
struct Iq3XxsSubBlockBits {
  const uint8_t* grid;  // 8 indices
  uint32_t signs;
};
inline Iq3XxsSubBlockBits Iq3XxsSubBlock(const BlockIq3Xxs& b, int ib32) {
  Iq3XxsSubBlockBits s{b.qs + 8 * ib32, 0};
  std::memcpy(&s.signs, b.qs + kQK_K / 4 + 4 * ib32, 4);
  return s;
}

// Grid index k (0..7) of IQ3_S sub-block ib32, its 9th bit from qh.
inline int Iq3SIndex(const BlockIq3S& b, int ib32, int k) {
  return b.qs[8 * ib32 + k] | (((b.qh[ib32] >> k) & 1) << 8);
}
// The 4-bit scale ls of IQ3_S sub-block ib32.
inline int Iq3SScale(const BlockIq3S& b, int ib32) { return (b.scales[ib32 / 2] >> (4 * (ib32 % 2))) & 0xf; }

// The 32 values of a sub-block as signed integers (grid magnitude with its sign, |v| <= 62),
// and the integer scale 2 * ls + 1 they share: value = d / 4 * scale * v.
inline int DecodeIq3XxsSubBlock(const BlockIq3Xxs& b, int ib32, int8_t* v) {
  const Iq3XxsSubBlockBits s = Iq3XxsSubBlock(b, ib32);
  for (int l = 0; l < 4; ++l) {
    const uint8_t signs = Iq2Signs((s.signs >> (7 * l)) & 127);
    for (int j = 0; j < 8; ++j) {
      const int m = static_cast<int>((kIq3XxsGrid[s.grid[2 * l + j / 4]] >> (8 * (j % 4))) & 0xff);
      v[8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -m : m);
    }
  }
  return 2 * static_cast<int>(s.signs >> 28) + 1;
}

// The same for IQ3_S (|v| <= 15): value = d * scale * v.
inline int DecodeIq3SSubBlock(const BlockIq3S& b, int ib32, int8_t* v) {
  for (int l = 0; l < 4; ++l) {
    const uint8_t signs = b.signs[4 * ib32 + l];
    for (int j = 0; j < 8; ++j) {
      const int m = static_cast<int>((kIq3SGrid[Iq3SIndex(b, ib32, 2 * l + j / 4)] >> (8 * (j % 4))) & 0xff);
      v[8 * l + j] = static_cast<int8_t>((signs >> j) & 1 ? -m : m);
    }
  }
  return 2 * Iq3SScale(b, ib32) + 1;
}

}  // namespace cohort::kernels
