// IQ2_XS and IQ2_S: their codebooks and the decoding of a sub-block of 32 values into its four
// groups' grid entries and sign bytes, shared by the scalar reference (quant_ref_iq2s.cc) and
// the SIMD kernels (vec_dot_{avx2,neon}_iq2s.cc). Internal to kernels.
#pragma once

#include <cstdint>

#include "kernels/iq_grids.h"
#include "kernels/quant_blocks.h"

namespace cohort::kernels {

// 8 magnitudes per entry, one byte each (value j in byte j): iq2_grids_xs.cc.
extern const uint64_t kIq2XsGrid[512];
extern const uint64_t kIq2SGrid[1024];

// Sub-block ib32 of an IQ2_XS or IQ2_S block: group l's (values 8l..8l+7) grid entry and its
// sign byte (bit j set: value j is negative), and the integer scales 2 * ls + 1 of the first and
// the second 16 values: value = d / 8 * scale * grid magnitude * sign.
struct Iq2SubBlock {
  uint64_t grid[4];
  uint8_t signs[4];
  int scale[2];
};

inline void Iq2SubBlockScales(const uint8_t* scales, int ib32, Iq2SubBlock* out) {
  out->scale[0] = 2 * (scales[ib32] & 0xf) + 1;
  out->scale[1] = 2 * (scales[ib32] >> 4) + 1;
}

// IQ2_XS: each group's uint16 is a 9-bit grid index and 7 sign bits, the 8th their parity.
inline Iq2SubBlock Iq2XsSubBlock(const BlockIq2Xs& b, int ib32) {
  Iq2SubBlock s;
  for (int l = 0; l < 4; ++l) {
    const uint16_t q = b.qs[4 * ib32 + l];
    s.grid[l] = kIq2XsGrid[q & 511];
    s.signs[l] = Iq2Signs(q >> 9);
  }
  Iq2SubBlockScales(b.scales, ib32, &s);
  return s;
}

// IQ2_S: group l's index is qs[4 ib32 + l] with bits 2l, 2l + 1 of qh[ib32] on top; its 8 signs
// are stored whole, in qs[32 + 4 ib32 + l].
inline Iq2SubBlock Iq2SSubBlock(const BlockIq2S& b, int ib32) {
  Iq2SubBlock s;
  for (int l = 0; l < 4; ++l) {
    const int index = b.qs[4 * ib32 + l] | ((b.qh[ib32] << (8 - 2 * l)) & 0x300);
    s.grid[l] = kIq2SGrid[index];
    s.signs[l] = b.qs[kQK_K / 8 + 4 * ib32 + l];
  }
  Iq2SubBlockScales(b.scales, ib32, &s);
  return s;
}

// For each sign byte, its 8 signs as +1/-1 bytes (0x01 for plus, 0xff for minus, value j in byte
// j): the multipliers ARM's vmulq_s8 takes for a group of Iq2SubBlock.
inline constexpr struct Iq2FullSignBytesTable {
  uint64_t bytes[256];
  constexpr Iq2FullSignBytesTable() : bytes() {
    for (uint32_t i = 0; i < 256; ++i) {
      for (int j = 0; j < 8; ++j) bytes[i] |= uint64_t{(i >> j) & 1 ? 0xffu : 0x01u} << (8 * j);
    }
  }
} kIq2FullSignBytes;

// The 32 signed values of a decoded sub-block (|v| <= 43).
inline void Iq2SubBlockValues(const Iq2SubBlock& s, int8_t* v) {
  for (int l = 0; l < 4; ++l) {
    for (int j = 0; j < 8; ++j) {
      const int m = static_cast<int>((s.grid[l] >> (8 * j)) & 0xff);
      v[8 * l + j] = static_cast<int8_t>((s.signs[l] >> j) & 1 ? -m : m);
    }
  }
}

}  // namespace cohort::kernels
