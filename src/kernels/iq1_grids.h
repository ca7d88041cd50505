// IQ1_S's and IQ1_M's codebook and the decoding of their sub-blocks (32 values) into integers,
// shared by the scalar reference and the SIMD kernels. Internal to kernels.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.h"

namespace cohort::kernels {

// 2048 points of {-1, 0, 1}^8, value j as the signed byte j of an entry: iq1_grids.cc.
extern const uint64_t kIq1sGrid[2048];

// Every value of a group of 8 is its grid value plus or minus this (ggml's IQ1S_DELTA and
// IQ1M_DELTA, both 1/8).
inline constexpr float kIq1Delta = 0.125f;

// IQ1_S sub-block ib: group l's grid index, the integer scale 2 * ls + 1 of its 32 values, and
// the sign of their delta.
inline int Iq1SGridIndex(const BlockIq1S& b, int ib, int l) {
  return b.qs[4 * ib + l] | (((b.qh[ib] >> (3 * l)) & 7) << 8);
}
inline int Iq1SScale(const BlockIq1S& b, int ib) { return 2 * ((b.qh[ib] >> 12) & 7) + 1; }
inline int Iq1SDeltaSign(const BlockIq1S& b, int ib) { return b.qh[ib] & 0x8000 ? -1 : 1; }

// IQ1_M sub-block ib, group l: its nibble of qh (3 high index bits, then the delta's sign).
inline int Iq1MNibble(const BlockIq1M& b, int ib, int l) {
  return (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 0xf;
}
inline int Iq1MGridIndex(const BlockIq1M& b, int ib, int l) {
  return b.qs[4 * ib + l] | ((Iq1MNibble(b, ib, l) & 7) << 8);
}
inline int Iq1MDeltaSign(const BlockIq1M& b, int ib, int l) { return Iq1MNibble(b, ib, l) & 8 ? -1 : 1; }
// Scale word w (of 4): the 3-bit scales of sub-blocks 2w and 2w + 1, halves in order, in bits
// 0..11, and nibble w of the fp16 super scale in bits 12..15.
inline uint16_t Iq1MScaleWord(const BlockIq1M& b, int w) {
  uint16_t v;
  std::memcpy(&v, b.scales + 2 * w, 2);
  return v;
}
// The integer scale 2 * ls + 1 of half h (values 16h .. 16h + 15) of sub-block ib.
inline int Iq1MScale(const BlockIq1M& b, int ib, int h) {
  return 2 * ((Iq1MScaleWord(b, ib / 2) >> (6 * (ib % 2) + 3 * h)) & 7) + 1;
}
// The fp16 bits of the super scale, gathered from the scale words' top nibbles.
inline uint16_t Iq1MSuperScale(const BlockIq1M& b) {
  uint16_t bits = 0;
  for (int w = 0; w < 4; ++w) bits |= static_cast<uint16_t>((Iq1MScaleWord(b, w) >> 12) << (4 * w));
  return bits;
}

// The two formats through one set of names, for code written once for both: group l's grid
// entry and delta sign, half h's integer scale (of sub-block ib), the fp16 super scale's bits.
inline uint64_t Iq1GridWord(const BlockIq1S& b, int ib, int l) { return kIq1sGrid[Iq1SGridIndex(b, ib, l)]; }
inline uint64_t Iq1GridWord(const BlockIq1M& b, int ib, int l) { return kIq1sGrid[Iq1MGridIndex(b, ib, l)]; }
inline int Iq1DeltaSign(const BlockIq1S& b, int ib, int) { return Iq1SDeltaSign(b, ib); }
inline int Iq1DeltaSign(const BlockIq1M& b, int ib, int l) { return Iq1MDeltaSign(b, ib, l); }
inline int Iq1Scale(const BlockIq1S& b, int ib, int) { return Iq1SScale(b, ib); }
inline int Iq1Scale(const BlockIq1M& b, int ib, int h) { return Iq1MScale(b, ib, h); }
inline uint16_t Iq1SuperScaleBits(const BlockIq1S& b) { return b.d; }
inline uint16_t Iq1SuperScaleBits(const BlockIq1M& b) { return Iq1MSuperScale(b); }

// A sub-block in integer form: value e = (v[e] + delta[e / 8] / 8) * scale[e / 16] * d.
struct Iq1SubBlock {
  int8_t v[32];  // grid values, -1, 0 or 1
  int delta[4];  // +1 or -1 per group of 8
  int scale[2];  // 2 * ls + 1 per 16 values (IQ1_S: the same for all 32)
};

inline void UnpackIq1Group(uint64_t grid, int8_t* v) {
  for (int j = 0; j < 8; ++j) v[j] = static_cast<int8_t>((grid >> (8 * j)) & 0xff);
}

template <typename Block>
void DecodeIq1SubBlock(const Block& b, int ib, Iq1SubBlock* out) {
  for (int l = 0; l < 4; ++l) {
    UnpackIq1Group(Iq1GridWord(b, ib, l), out->v + 8 * l);
    out->delta[l] = Iq1DeltaSign(b, ib, l);
  }
  out->scale[0] = Iq1Scale(b, ib, 0);
  out->scale[1] = Iq1Scale(b, ib, 1);
}

}  // namespace cohort::kernels
