// The byte layouts of ggml's quantized blocks (ggml-common.h), as plain structs. Internal to
// kernels: other layers see rows as bytes and use quant.h. Half-precision fields are stored
// as raw uint16_t bits; convert with core/fp16.h. The structs are packed (alignment 1) so a
// row may start at any byte, e.g. inside an mmapped file or a test's misaligned buffer.
#pragma once

#include <cstdint>
#include <cstring>

namespace cohort::kernels {

inline constexpr int kQK = 32;    // elements per block of the legacy types
inline constexpr int kQK_K = 256; // elements per K-quant super-block

struct __attribute__((packed)) BlockQ4_0 {
  uint16_t d;           // scale
  uint8_t qs[kQK / 2];  // element j in low nibble of qs[j], element j+16 in the high nibble
};
struct __attribute__((packed)) BlockQ4_1 {
  uint16_t d;  // scale
  uint16_t m;  // minimum
  uint8_t qs[kQK / 2];
};
struct __attribute__((packed)) BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // bit j = 5th bit of element j
  uint8_t qs[kQK / 2];
};
struct __attribute__((packed)) BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct __attribute__((packed)) BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct __attribute__((packed)) BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d * sum(qs)
  int8_t qs[kQK];
};

// K-quants: super-blocks of 256 with per-sub-block scales.
struct __attribute__((packed)) BlockQ2_K {
  uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min, per 16 elements
  uint8_t qs[kQK_K / 4];       // 2-bit quants
  uint16_t d;                  // super scale of the scales
  uint16_t dmin;               // super scale of the mins
};
struct __attribute__((packed)) BlockQ3_K {
  uint8_t hmask[kQK_K / 8];  // high bit of each 3-bit quant
  uint8_t qs[kQK_K / 4];     // low 2 bits
  uint8_t scales[12];        // 16 6-bit scales (biased by 32)
  uint16_t d;
};
struct __attribute__((packed)) BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];  // 8 6-bit scales and 8 6-bit mins, one per 32 elements
  uint8_t qs[kQK_K / 2];
};
struct __attribute__((packed)) BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
struct __attribute__((packed)) BlockQ6_K {
  uint8_t ql[kQK_K / 2];       // low 4 bits
  uint8_t qh[kQK_K / 4];       // high 2 bits
  int8_t scales[kQK_K / 16];   // 8-bit scales, one per 16 elements
  uint16_t d;
};
struct __attribute__((packed)) BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];  // sums of each 16 quants
};

// MXFP4 (OCP microscaling): a shared power-of-two scale 2^(e - 127) and 32 e2m1 values, stored
// doubled as kMxfp4Values (so the scale is applied halved: Mxfp4HalfScale).
struct __attribute__((packed)) BlockMxfp4 {
  uint8_t e;            // E8M0 exponent
  uint8_t qs[kQK / 2];  // element j in low nibble of qs[j], element j+16 in the high nibble
};
// e2m1 values times two (ggml's kvalues_mxfp4): 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128), half the block's scale, exactly (ggml_e8m0_to_fp32_half): e = 0 and 1 are the
// subnormals 2^-128 and 2^-127.
inline float Mxfp4HalfScale(uint8_t e) {
  const uint32_t bits = e < 2 ? (uint32_t{0x00200000} << e) : (static_cast<uint32_t>(e) - 1) << 23;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IQ4_NL and IQ4_XS: 4-bit indices into kIq4NlValues (ggml's kvalues_iq4nl), laid out as Q4_0's
// nibbles (element j low nibble of qs[j], element j+16 the high one, per 32 elements).
struct __attribute__((packed)) BlockIq4Nl {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct __attribute__((packed)) BlockIq4Xs {
  uint16_t d;                 // super scale
  uint16_t scales_h;          // high 2 bits of the 8 sub-block scales
  uint8_t scales_l[kQK_K / 64];  // low 4 bits, two scales a byte
  uint8_t qs[kQK_K / 2];
};
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// Sub-block ib's scale of an IQ4_XS block, -32..31.
inline int Iq4XsScale(const BlockIq4Xs& b, int ib) {
  return (((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4)) - 32;
}

// IQ1_S and IQ1_M: per 8 values an 11-bit index into a grid of {-1, 0, 1}^8 (iq1_grids.h), the
// values shifted by a delta of +-1/8. IQ1_S, per 32 values: qs holds 4 index bytes, qh one word
// of their 4 x 3 high bits (bits 0..11), a 3-bit scale ls (12..14) and the delta's sign (15):
// value = d * (2 * ls + 1) * (grid + delta).
struct __attribute__((packed)) BlockIq1S {
  uint16_t d;
  uint8_t qs[kQK_K / 8];
  uint16_t qh[kQK_K / 32];
};
// IQ1_M, per 32 values: 4 index bytes in qs, and in qh two bytes whose nibbles hold each group's
// 3 high index bits and its delta's sign (bit 3); a 3-bit scale per 16 values, four to each of
// the little-endian scale words, whose top nibbles together make the fp16 super scale.
struct __attribute__((packed)) BlockIq1M {
  uint8_t qs[kQK_K / 8];
  uint8_t qh[kQK_K / 16];
  uint8_t scales[kQK_K / 32];
};
static_assert(sizeof(BlockIq1S) == 50);
static_assert(sizeof(BlockIq1M) == 56);
// IQ3_XXS: per 32 values 8 grid indices (one byte per 4 values, iq3_grids.h) in qs[8 * ib32..],
// then, from qs[64], one little-endian word per 32 values: 4 x 7 sign bits (IQ2_XXS's parity rule)
// and the scale ls in the top 4 bits: the values are d * (0.5 + ls) / 2 * grid magnitude * sign.
struct __attribute__((packed)) BlockIq3Xxs {
  uint16_t d;
  uint8_t qs[3 * kQK_K / 8];  // 64 grid indices, then 8 words of signs and scales
};
// IQ3_S: per 32 values 8 grid indices of 9 bits (low 8 in qs, bit k of qh[ib32] the 9th of index
// k), 4 sign bytes (byte l for values 8l..8l+7, bit j for value j), a 4-bit scale ls (the low
// nibble of scales[ib32 / 2] for even ib32): the values are d * (1 + 2 * ls) * magnitude * sign.
struct __attribute__((packed)) BlockIq3S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];
  uint8_t qh[kQK_K / 32];
  uint8_t signs[kQK_K / 8];
  uint8_t scales[kQK_K / 64];
};
static_assert(sizeof(BlockIq3Xxs) == 98);
static_assert(sizeof(BlockIq3S) == 110);

// IQ2_XXS: per 32 values two little-endian words: the first holds 4 grid indices (one byte per
// 8 values, iq_grids.h), the second 4 x 7 sign bits (the 8th sign is their parity) and, in its
// top 4 bits, the scale ls: the values are d * (0.5 + ls) / 4 * grid magnitude * sign.
struct __attribute__((packed)) BlockIq2Xxs {
  uint16_t d;
  uint8_t qs[kQK_K / 4];  // 8 sub-blocks of 8 bytes
};

// IQ2_XS: per 8 values one little-endian uint16: a 9-bit index into a 512-point grid (low bits)
// and 7 sign bits (the 8th is their parity, as IQ2_XXS's); per 16 values a 4-bit scale ls
// (sub-block ib32's first 16 in the low nibble of scales[ib32]): d * (0.5 + ls) / 4 * grid * sign.
struct __attribute__((packed)) BlockIq2Xs {
  uint16_t d;
  uint16_t qs[kQK_K / 8];
  uint8_t scales[kQK_K / 32];
};
// IQ2_S: per 8 values an index into a 1024-point grid, its low 8 bits in qs[0..31] and its high 2
// in qh (group l of sub-block ib32 at bits 2l of qh[ib32]), and 8 explicit sign bits in
// qs[32..63]; scales as IQ2_XS's.
struct __attribute__((packed)) BlockIq2S {
  uint16_t d;
  uint8_t qs[kQK_K / 4];  // 32 index bytes, then 32 sign bytes
  uint8_t qh[kQK_K / 32];
  uint8_t scales[kQK_K / 32];
};

static_assert(sizeof(BlockIq2Xs) == 74);
static_assert(sizeof(BlockIq2S) == 82);
static_assert(sizeof(BlockIq2Xxs) == 66);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Scale j and min j (6 bits each) of a Q4_K/Q5_K block, as ggml's get_scale_min_k4.
inline void GetScaleMinK4(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xf) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Mins times activation sums for Q4_K's sub-blocks 2c and 2c + 1 (64 elements) against a Q8_K
// block, whose bsums cover 16 elements: sub-block j (32 elements) is bsums[2j] + bsums[2j+1].
inline int Q4KPairMinSum(const BlockQ8_K& y, const int* mins, int c) {
  return mins[2 * c] * (y.bsums[4 * c] + y.bsums[4 * c + 1]) +
         mins[2 * c + 1] * (y.bsums[4 * c + 2] + y.bsums[4 * c + 3]);
}

// The 16 6-bit scales of Q3_K: low nibble in byte j (j < 8) or high nibble of byte j - 8,
// top two bits in byte 8 + j % 4 at bit 2 * (j / 4). Stored biased by 32.
inline int GetQ3KScale(const uint8_t* s, int j) {
  const int low = j < 8 ? (s[j] & 0xf) : (s[j - 8] >> 4);
  const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// TQ1_0 (ternary, 1.69 bits): qs[m] (m < 32) holds values m + 32 n, n = 0..4, and qs[32 + m]
// (m < 16) values 160 + m + 16 n, as a base-3 number of their trits t + 1 (the first value
// the leading digit) scaled to a byte, ceil(number * 256 / 243): digit n is the top two bits
// of (uint8)(byte * 3^n) * 3 (Tq1Trit). qh[j] holds values 240 + j + 4 n, n = 0..3, the same
// way with a fifth digit 0. The values are d * t.
struct __attribute__((packed)) BlockTq1_0 {
  uint8_t qs[48];
  uint8_t qh[4];
  uint16_t d;
};
// TQ2_0 (ternary, 2.06 bits): bits 2l..2l+1 of qs[32 c + m] hold t + 1 of value 128 c + 32 l + m.
struct __attribute__((packed)) BlockTq2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTq1_0) == 54);
static_assert(sizeof(BlockTq2_0) == 66);

// Base-3 digit n (0, 1 or 2: the trit plus one) of a TQ1_0 byte.
inline int Tq1Trit(uint8_t byte, int n) {
  constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const auto shifted = static_cast<uint8_t>(byte * kPow3[n]);
  return (shifted * 3) >> 8;
}

}  // namespace cohort::kernels
