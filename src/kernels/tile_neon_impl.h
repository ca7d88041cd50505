// The NEON tile kernels (tile.h, tile_wide.h) as templates over the instantiation: included
// only by tile_wide_neon.cc (kI8mm = false, sdot) and tile_wide_neon_i8mm.cc (kI8mm = true,
// smmla), each after its own `#pragma GCC target`, so every function here is compiled for the
// including file's ISA. The helpers are in an unnamed namespace for that reason: each file
// keeps its own copy, compiled for its own target, and the linker never swaps one for the other.
//
// Design (the x86 wide tiles' on 128-bit registers): a wide tile is 16 rows as four quads of
// 4 rows, one row per 32-bit lane, times up to 8 tokens quantized once per matmul; each quad
// makes one pass over its rows' blocks for all the tokens, so every weight byte is loaded and
// unpacked once per call while the 8 tokens' accumulators stay in registers. Rows come as
// stored or packed by PackRows in pack.cc's layouts (tile_wide.h), the layouts the x86
// kernels read.
// - Q4_0 and Q4_K sum whole blocks (sub-blocks) of integer products per (row, token), as their
//   vec-dots do: the quad's 16-byte segments are transposed to "word j of rows 0..3", so
//   sdot-by-element (vdotq_laneq_s32) leaves the 4 rows' sums in the 4 lanes with no
//   horizontal reduction (the packed layouts are already in that form); the i8mm instance
//   pairs rows and tokens instead (smmla: rows 2p, 2p + 1 times tokens 2u, 2u + 1, 8 bytes
//   deep), twice the products per instruction, with the tokens interleaved by pairs once per
//   chunk of blocks for the four quads (ActZipped). The integer sums are exact in any order,
//   and the float steps after them are the vec-dot's, lane by lane.
// No ARM machine has measured these; the generated code was counted instead (8 tokens, per
// quad of rows): Q4_0 160 instructions per block with sdot (64 of them sdot), 134 with smmla
// (32 smmla); Q4_K about 1290 per super-block with sdot (512 sdot), 1170 with smmla (256).
// - Q8_0 and Q6_K, whose vec-dots keep 8 int32 / float lanes per row (lane m the products of
//   bytes 4m..4m+3), keep them: sdot without transposition, per row, the float lanes in two
//   registers per (row, token), and the vec-dot's final horizontal sum done for 4 rows at once
//   after a 4x4 transpose. smmla sums 8 bytes deep, so it cannot make these lanes: the i8mm
//   instance runs the same code.
#pragma once

#if defined(__aarch64__)
#include <arm_neon.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/fp16.h"
#include "kernels/quant_blocks.h"
#include "kernels/tile.h"
#include "kernels/tile_neon.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels::neon {
namespace {

// ---- Loads and the integer step shared by Q4_0 and Q4_K ----------------------------------

// Four rows' 16 bytes at one element range, as the integer step takes them. Dot: v[j] lane m
// = word j (bytes 4j..4j+3) of row m. I8mm: v[2p + h] = bytes 8h..8h+7 of row 2p, then of row
// 2p + 1 (smmla's 2x8 operand).
struct Quad16 {
  int8x16_t v[4];
};

// From the 4 rows' 16 bytes, one vector per row.
template <bool kI8mm>
inline Quad16 FromRows(int8x16_t r0, int8x16_t r1, int8x16_t r2, int8x16_t r3) {
  Quad16 q;
  if constexpr (kI8mm) {
    const int64x2_t a = vreinterpretq_s64_s8(r0), b = vreinterpretq_s64_s8(r1);
    const int64x2_t c = vreinterpretq_s64_s8(r2), d = vreinterpretq_s64_s8(r3);
    q.v[0] = vreinterpretq_s8_s64(vzip1q_s64(a, b));
    q.v[1] = vreinterpretq_s8_s64(vzip2q_s64(a, b));
    q.v[2] = vreinterpretq_s8_s64(vzip1q_s64(c, d));
    q.v[3] = vreinterpretq_s8_s64(vzip2q_s64(c, d));
  } else {  // a 4x4 transpose of 32-bit words
    const int32x4_t t0 = vtrn1q_s32(vreinterpretq_s32_s8(r0), vreinterpretq_s32_s8(r1));
    const int32x4_t t1 = vtrn2q_s32(vreinterpretq_s32_s8(r0), vreinterpretq_s32_s8(r1));
    const int32x4_t t2 = vtrn1q_s32(vreinterpretq_s32_s8(r2), vreinterpretq_s32_s8(r3));
    const int32x4_t t3 = vtrn2q_s32(vreinterpretq_s32_s8(r2), vreinterpretq_s32_s8(r3));
    q.v[0] = vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
    q.v[1] = vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
    q.v[2] = vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2)));
    q.v[3] = vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3)));
  }
  return q;
}

// From the packed form: w[j] lane m = word j of row m (as Quad16's dot form).
template <bool kI8mm>
inline Quad16 FromWords(int8x16_t w0, int8x16_t w1, int8x16_t w2, int8x16_t w3) {
  if constexpr (kI8mm) {
    const int32x4_t a = vreinterpretq_s32_s8(w0), b = vreinterpretq_s32_s8(w1);
    const int32x4_t c = vreinterpretq_s32_s8(w2), d = vreinterpretq_s32_s8(w3);
    return {{vreinterpretq_s8_s32(vzip1q_s32(a, b)), vreinterpretq_s8_s32(vzip1q_s32(c, d)),
             vreinterpretq_s8_s32(vzip2q_s32(a, b)), vreinterpretq_s8_s32(vzip2q_s32(c, d))}};
  } else {
    return {{w0, w1, w2, w3}};
  }
}

// Low and high nibbles of each byte (bytewise, so they commute with Quad16's rearrangement).
inline Quad16 LowNibbles(const Quad16& q) {
  Quad16 r;
  for (int j = 0; j < 4; ++j) r.v[j] = vreinterpretq_s8_u8(vandq_u8(vreinterpretq_u8_s8(q.v[j]), vdupq_n_u8(0x0f)));
  return r;
}
inline Quad16 HighNibbles(const Quad16& q) {
  Quad16 r;
  for (int j = 0; j < 4; ++j) r.v[j] = vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(q.v[j]), 4));
  return r;
}
inline Quad16 MinusEight(const Quad16& q) {
  Quad16 r;
  for (int j = 0; j < 4; ++j) r.v[j] = vsubq_s8(q.v[j], vdupq_n_s8(8));
  return r;
}

// T tokens' 16 activation bytes at one element range. Dot: v[t] = token t's bytes. I8mm:
// v[2u + h] = bytes 8h..8h+7 of token 2u, then of token 2u + 1 (the last token twice when T
// is odd; that lane's sums are dropped).
template <int T, bool kI8mm>
struct Act16 {
  static constexpr int kVectors = kI8mm ? (T + 1) / 2 * 2 : T;
  int8x16_t v[kVectors];

  Act16() = default;
  Act16(const uint8_t* const* act, int64_t off) {
    if constexpr (kI8mm) {
      for (int u = 0; u < (T + 1) / 2; ++u) {
        const int64x2_t a = vreinterpretq_s64_u8(vld1q_u8(act[2 * u] + off));
        const int64x2_t b = 2 * u + 1 < T ? vreinterpretq_s64_u8(vld1q_u8(act[2 * u + 1] + off)) : a;
        v[2 * u] = vreinterpretq_s8_s64(vzip1q_s64(a, b));
        v[2 * u + 1] = vreinterpretq_s8_s64(vzip2q_s64(a, b));
      }
    } else {
      for (int t = 0; t < T; ++t) v[t] = vreinterpretq_s8_u8(vld1q_u8(act[t] + off));
    }
  }
};

// Exact integer sums of products, 4 rows x T tokens. Dot: s[t] lane m = (row m, token t).
// I8mm: s[2u] = (row 0, token 2u), (0, 2u+1), (1, 2u), (1, 2u+1); s[2u + 1] the same for rows 2, 3.
template <int T, bool kI8mm>
struct QuadSums {
  static constexpr int kVectors = kI8mm ? (T + 1) / 2 * 2 : T;
  int32x4_t s[kVectors];

  QuadSums() {
    for (int k = 0; k < kVectors; ++k) s[k] = vdupq_n_s32(0);
  }
  void Add(const Quad16& w, const Act16<T, kI8mm>& a) {
    if constexpr (kI8mm) {
      for (int u = 0; u < kVectors / 2; ++u) {
        s[2 * u] = vmmlaq_s32(s[2 * u], w.v[0], a.v[2 * u]);
        s[2 * u] = vmmlaq_s32(s[2 * u], w.v[1], a.v[2 * u + 1]);
        s[2 * u + 1] = vmmlaq_s32(s[2 * u + 1], w.v[2], a.v[2 * u]);
        s[2 * u + 1] = vmmlaq_s32(s[2 * u + 1], w.v[3], a.v[2 * u + 1]);
      }
    } else {
      for (int t = 0; t < T; ++t) {
        s[t] = vdotq_laneq_s32(s[t], w.v[0], a.v[t], 0);
        s[t] = vdotq_laneq_s32(s[t], w.v[1], a.v[t], 1);
        s[t] = vdotq_laneq_s32(s[t], w.v[2], a.v[t], 2);
        s[t] = vdotq_laneq_s32(s[t], w.v[3], a.v[t], 3);
      }
    }
  }
  // Lane m = the sum of row m with token t.
  int32x4_t Get(int t) const {
    if constexpr (kI8mm) {
      const int u = t / 2;
      return t % 2 == 0 ? vuzp1q_s32(s[2 * u], s[2 * u + 1]) : vuzp2q_s32(s[2 * u], s[2 * u + 1]);
    } else {
      return s[t];
    }
  }
};

// Where a kernel's Act16 come from, for block i's 16-byte segment s of quants (after a
// kHeader-byte header in kBlock-byte blocks): the token rows themselves, loaded (and for i8mm
// interleaved) at each use...
template <int T, bool kI8mm, int64_t kBlock, int64_t kHeader>
struct ActRows {
  const uint8_t* const* act;
  Act16<T, kI8mm> Get(int64_t i, int s) const { return Act16<T, kI8mm>(act, i * kBlock + kHeader + 16 * s); }
};

// ...or, for i8mm, blocks [i0, i0 + kChunk) interleaved by token pairs once, into a buffer
// (8 KB at 8 tokens) that the four quads of a wide tile then read as they are.
template <int T, int64_t kBlock, int64_t kHeader, int kSegs, int64_t kChunk>
struct ActZipped {
  static constexpr int kVectors = Act16<T, true>::kVectors;
  int8x16_t buf[kChunk * kSegs * kVectors];
  int64_t i0 = 0;

  void Fill(const uint8_t* const* act, int64_t first, int64_t count) {
    i0 = first;
    for (int64_t b = 0; b < count; ++b) {
      for (int s = 0; s < kSegs; ++s) {
        const Act16<T, true> a(act, (first + b) * kBlock + kHeader + 16 * s);
        for (int k = 0; k < kVectors; ++k) buf[(b * kSegs + s) * kVectors + k] = a.v[k];
      }
    }
  }
  Act16<T, true> Get(int64_t i, int s) const {
    Act16<T, true> a;
    const int8x16_t* p = buf + ((i - i0) * kSegs + s) * kVectors;
    for (int k = 0; k < kVectors; ++k) a.v[k] = p[k];
    return a;
  }
};

inline uint16_t LoadU16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Four halves (fp16 bits) as floats: exact, as Fp16ToFp32.
inline float32x4_t HalvesToFloat(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3) {
  const uint16_t h[4] = {h0, h1, h2, h3};
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
}

// The fp16 at byte `off` of each of T tokens, as floats (d[t]).
template <int T>
inline void TokenHalves(const uint8_t* const* act, int64_t off, float* d) {
  uint16_t h[8] = {};
  for (int t = 0; t < T; ++t) h[t] = LoadU16(act[t] + off);
  const float16x8_t v = vreinterpretq_f16_u16(vld1q_u16(h));
  vst1q_f32(d, vcvt_f32_f16(vget_low_f16(v)));
  if constexpr (T > 4) vst1q_f32(d + 4, vcvt_high_f32_f16(v));
}

// The vec-dots' HorizontalSum (lanes m and m + 4, then 0 + 2 and 1 + 3, then those two) of
// rows 0..3, each given as its lanes 0..3 (lo[k]) and 4..7 (hi[k]): lane k = row k's sum.
inline float32x4_t HorizontalSums4(const float32x4_t* lo, const float32x4_t* hi) {
  float32x4_t s[4];
  for (int k = 0; k < 4; ++k) s[k] = vaddq_f32(lo[k], hi[k]);
  const float32x4_t t0 = vtrn1q_f32(s[0], s[1]), t1 = vtrn2q_f32(s[0], s[1]);
  const float32x4_t t2 = vtrn1q_f32(s[2], s[3]), t3 = vtrn2q_f32(s[2], s[3]);
  const auto c = [](float32x4_t x, float32x4_t y, bool second) {
    const float64x2_t a = vreinterpretq_f64_f32(x), b = vreinterpretq_f64_f32(y);
    return vreinterpretq_f32_f64(second ? vtrn2q_f64(a, b) : vtrn1q_f64(a, b));
  };
  // c0 lane k = s[k][0], c1 = s[k][1], c2 = s[k][2], c3 = s[k][3].
  const float32x4_t c0 = c(t0, t2, false), c2 = c(t0, t2, true);
  const float32x4_t c1 = c(t1, t3, false), c3 = c(t1, t3, true);
  return vaddq_f32(vaddq_f32(c0, c2), vaddq_f32(c1, c3));
}

// ---- Q4_0 ---------------------------------------------------------------------------------

// Rows as stored: the quad's 4 row pointers (repeated for a short tile).
struct Q4_0Rows {
  const uint8_t* row[4];
  float32x4_t Scales(int64_t i) const {
    const int64_t o = i * static_cast<int64_t>(sizeof(BlockQ4_0));
    return HalvesToFloat(LoadU16(row[0] + o), LoadU16(row[1] + o), LoadU16(row[2] + o), LoadU16(row[3] + o));
  }
  template <bool kI8mm>
  Quad16 Quants(int64_t i) const {
    const int64_t o = i * static_cast<int64_t>(sizeof(BlockQ4_0)) + 2;
    return FromRows<kI8mm>(vld1q_s8(reinterpret_cast<const int8_t*>(row[0] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[1] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[2] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[3] + o)));
  }
};

// Rows packed by PackRows: block i of the group is its 16 rows' scales, then word c of the 16
// rows' qs for c = 0..3 (64 bytes each); quad q's part of each is at 8q, 16q.
struct Q4_0Packed {
  static constexpr int64_t kBlockBytes = 16 * static_cast<int64_t>(sizeof(BlockQ4_0));
  const uint8_t* group;
  int q;
  float32x4_t Scales(int64_t i) const {
    const uint8_t* b = group + i * kBlockBytes + 8 * q;
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(b)));
  }
  template <bool kI8mm>
  Quad16 Quants(int64_t i) const {
    const int8_t* b = reinterpret_cast<const int8_t*>(group + i * kBlockBytes + 32 + 16 * q);
    return FromWords<kI8mm>(vld1q_s8(b), vld1q_s8(b + 64), vld1q_s8(b + 128), vld1q_s8(b + 192));
  }
};

// VecDotQ4_0's steps for 4 rows x T tokens over blocks [i0, i1): per block, the exact integer
// sum, then acc = fma(sum, d_w * d_a, acc) in each lane (acc carried in and out).
template <int T, bool kI8mm, class Src, class Acts>
void Q4_0Quad(const Src& w, const Acts& acts, const uint8_t* const* act, int64_t i0, int64_t i1, float32x4_t* acc_io) {
  float32x4_t acc[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_io[t];
  constexpr int64_t kActBlock = sizeof(BlockQ8_0);
  for (int64_t i = i0; i < i1; ++i) {
    const Quad16 q = w.template Quants<kI8mm>(i);
    QuadSums<T, kI8mm> s;
    s.Add(MinusEight(LowNibbles(q)), acts.Get(i, 0));
    s.Add(MinusEight(HighNibbles(q)), acts.Get(i, 1));
    float yd[8];
    TokenHalves<T>(act, i * kActBlock, yd);
    const float32x4_t wd = w.Scales(i);
    for (int t = 0; t < T; ++t) acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(s.Get(t)), vmulq_n_f32(wd, yd[t]));
  }
  for (int t = 0; t < T; ++t) acc_io[t] = acc[t];
}
template <int T, bool kI8mm>
using Q4_0Acts = ActRows<T, kI8mm, sizeof(BlockQ8_0), 2>;

// ---- Q4_K ---------------------------------------------------------------------------------

// Rows as stored.
struct Q4KRows {
  const uint8_t* row[4];
  // The first 16 bytes of row k's block i (d, dmin, scales).
  void Header(int64_t i, int k, uint8_t* h) const {
    std::memcpy(h, row[k] + i * static_cast<int64_t>(sizeof(BlockQ4_K)), 16);
  }
  // 16-byte segment `seg` (1..8: qs bytes 16(seg-1)..) of the 4 rows' block i.
  template <bool kI8mm>
  Quad16 Segment(int64_t i, int seg) const {
    const int64_t o = i * static_cast<int64_t>(sizeof(BlockQ4_K)) + 16 * seg;
    return FromRows<kI8mm>(vld1q_s8(reinterpret_cast<const int8_t*>(row[0] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[1] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[2] + o)),
                           vld1q_s8(reinterpret_cast<const int8_t*>(row[3] + o)));
  }
};

// Rows packed by PackRows (PackSegments16): block i of the group is 9 segments of 256 bytes,
// segment s holding word j of the 16 rows' bytes 16s..16s+15 at 64j; quad q's at 16q.
struct Q4KPacked {
  static constexpr int64_t kBlockBytes = 16 * static_cast<int64_t>(sizeof(BlockQ4_K));
  const uint8_t* group;
  int q;
  void Header(int64_t i, int k, uint8_t* h) const {
    const uint8_t* b = group + i * kBlockBytes + 4 * (4 * q + k);
    for (int j = 0; j < 4; ++j) std::memcpy(h + 4 * j, b + 64 * j, 4);
  }
  template <bool kI8mm>
  Quad16 Segment(int64_t i, int seg) const {
    const int8_t* b = reinterpret_cast<const int8_t*>(group + i * kBlockBytes + 256 * seg + 16 * q);
    return FromWords<kI8mm>(vld1q_s8(b), vld1q_s8(b + 64), vld1q_s8(b + 128), vld1q_s8(b + 192));
  }
};

// VecDotQ4_K<kPerPair>'s steps for 4 rows x T tokens over super-blocks [i0, i1), its two
// accumulators carried in and out (acc_io[t], acc_io[T + t]).
template <int T, bool kI8mm, bool kPerPair, class Src, class Acts>
void Q4KQuad(const Src& w, const Acts& acts, const uint8_t* const* act, int64_t i0, int64_t i1, float32x4_t* acc_io) {
  float32x4_t acc[T], acc_min[T];
  for (int t = 0; t < T; ++t) acc[t] = acc_io[t], acc_min[t] = acc_io[T + t];
  constexpr int64_t kActBlock = sizeof(BlockQ8_K);
  for (int64_t i = i0; i < i1; ++i) {
    // The 4 rows' scales and mins as lanes, and their super-block scales.
    int32_t sc[8][4], mn[8][4];
    uint16_t d16[4], dmin16[4];
    for (int k = 0; k < 4; ++k) {
      uint8_t h[16];
      w.Header(i, k, h);
      d16[k] = LoadU16(h);
      dmin16[k] = LoadU16(h + 2);
      for (int j = 0; j < 8; ++j) {
        int s, m;
        GetScaleMinK4(h + 4, j, &s, &m);
        sc[j][k] = s;
        mn[j][k] = m;
      }
    }
    const float32x4_t wd = HalvesToFloat(d16[0], d16[1], d16[2], d16[3]);
    const float32x4_t wdmin = HalvesToFloat(dmin16[0], dmin16[1], dmin16[2], dmin16[3]);
    int32x4_t mnv[8];
    for (int j = 0; j < 8; ++j) mnv[j] = vld1q_s32(mn[j]);
    // The mins' part first: acc_min is an accumulator of its own, fed in the vec-dot's order
    // (per pair of sub-blocks, or once per super-block), so it need not wait for the sums.
    float32x4_t d[T];
    for (int t = 0; t < T; ++t) {
      const uint8_t* y = act[t] + i * kActBlock;
      float yd;
      std::memcpy(&yd, y, 4);
      d[t] = vmulq_n_f32(wd, yd);
      const float32x4_t dmin = vmulq_n_f32(wdmin, yd);
      // Lane j of bp_lo (bp_hi): the bsums of sub-block j (4 + j), bsums[2j] + bsums[2j + 1].
      const int16x8_t b0 = vld1q_s16(reinterpret_cast<const int16_t*>(y + offsetof(BlockQ8_K, bsums)));
      const int16x8_t b1 = vld1q_s16(reinterpret_cast<const int16_t*>(y + offsetof(BlockQ8_K, bsums) + 16));
      const int16x8_t bp = vpaddq_s16(b0, b1);
      const int32x4_t bp_lo = vmovl_s16(vget_low_s16(bp)), bp_hi = vmovl_high_s16(bp);
      // Q4KPairMinSum of pairs c = 0..3, lane k = row k.
      const int32x4_t pair_min[4] = {
          vmlaq_laneq_s32(vmulq_laneq_s32(mnv[0], bp_lo, 0), mnv[1], bp_lo, 1),
          vmlaq_laneq_s32(vmulq_laneq_s32(mnv[2], bp_lo, 2), mnv[3], bp_lo, 3),
          vmlaq_laneq_s32(vmulq_laneq_s32(mnv[4], bp_hi, 0), mnv[5], bp_hi, 1),
          vmlaq_laneq_s32(vmulq_laneq_s32(mnv[6], bp_hi, 2), mnv[7], bp_hi, 3)};
      if constexpr (kPerPair) {
        for (int c = 0; c < 4; ++c) acc_min[t] = vfmaq_f32(acc_min[t], vcvtq_f32_s32(pair_min[c]), dmin);
      } else {
        const int32x4_t min_sum = vaddq_s32(vaddq_s32(vaddq_s32(pair_min[0], pair_min[1]), pair_min[2]), pair_min[3]);
        acc_min[t] = vfmaq_f32(acc_min[t], vcvtq_f32_s32(min_sum), dmin);
      }
    }
    int32x4_t sum[T];
    for (int t = 0; t < T; ++t) sum[t] = vdupq_n_s32(0);
    for (int c = 0; c < 4; ++c) {
      // Chunk c: qs bytes 32c..32c+31, sub-block 2c in the low nibbles, 2c + 1 in the high;
      // each sub-block's sums are folded into sum as soon as they are made.
      const Quad16 q0 = w.template Segment<kI8mm>(i, 1 + 2 * c);
      const Quad16 q1 = w.template Segment<kI8mm>(i, 2 + 2 * c);
      {
        QuadSums<T, kI8mm> lo;
        lo.Add(LowNibbles(q0), acts.Get(i, 4 * c));
        lo.Add(LowNibbles(q1), acts.Get(i, 4 * c + 1));
        const int32x4_t sc_lo = vld1q_s32(sc[2 * c]);
        for (int t = 0; t < T; ++t) sum[t] = vmlaq_s32(sum[t], lo.Get(t), sc_lo);
      }
      {
        QuadSums<T, kI8mm> hi;
        hi.Add(HighNibbles(q0), acts.Get(i, 4 * c + 2));
        hi.Add(HighNibbles(q1), acts.Get(i, 4 * c + 3));
        const int32x4_t sc_hi = vld1q_s32(sc[2 * c + 1]);
        for (int t = 0; t < T; ++t) sum[t] = vmlaq_s32(sum[t], hi.Get(t), sc_hi);
      }
      if constexpr (kPerPair) {
        for (int t = 0; t < T; ++t) {
          acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(sum[t]), d[t]);
          sum[t] = vdupq_n_s32(0);
        }
      }
    }
    if constexpr (!kPerPair) {
      for (int t = 0; t < T; ++t) acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(sum[t]), d[t]);
    }
  }
  for (int t = 0; t < T; ++t) acc_io[t] = acc[t], acc_io[T + t] = acc_min[t];
}
template <int T, bool kI8mm>
using Q4KActs = ActRows<T, kI8mm, sizeof(BlockQ8_K), offsetof(BlockQ8_K, qs)>;

// ---- Q8_0 ---------------------------------------------------------------------------------

// Where a quad's blocks lie within one chunk of kQ8_0ChunkBlocks blocks: row k's scale of
// the chunk's block b at scale[k] + b * scale_step, its quants at quants[k] + b * quant_step.
struct Q8_0Chunk {
  const uint8_t* scale[4];
  const uint8_t* quants[4];
  int64_t scale_step, quant_step;
};

struct Q8_0Rows {
  const uint8_t* row[4];
  Q8_0Chunk Chunk(int64_t c) const {
    constexpr int64_t kBlock = sizeof(BlockQ8_0);
    Q8_0Chunk r;
    for (int k = 0; k < 4; ++k) {
      r.scale[k] = row[k] + c * kQ8_0ChunkBlocks * kBlock;
      r.quants[k] = r.scale[k] + 2;
    }
    r.scale_step = r.quant_step = kBlock;
    return r;
  }
};

// Packed (Q8_0PackedLayout): per chunk, quad q's scales block by block and row by row, then
// its quants the same way.
struct Q8_0Packed {
  const uint8_t* group;
  int q;
  Q8_0PackedLayout layout;
  Q8_0Chunk Chunk(int64_t c) const {
    Q8_0Chunk r;
    for (int k = 0; k < 4; ++k) {
      r.scale[k] = group + layout.Quad(c, q) + k * layout.kScaleBytes;
      r.quants[k] = group + layout.QuantsOfQuad(c, q) + k * layout.kQuantBytes;
    }
    r.scale_step = kQ8_0QuadRows * layout.kScaleBytes;
    r.quant_step = kQ8_0QuadRows * layout.kQuantBytes;
    return r;
  }
};

// Blocks [0, blocks) of a chunk for G (1 or 2) tokens: VecDotQ8_0's 8 lanes per (row, token),
// lane m += (products of bytes 4m..4m+3) * (d_w * d_a), acc[(k * G + t) * 2 + half].
template <int G>
inline void Q8_0ChunkRun(const Q8_0Chunk& w, int64_t blocks, const uint8_t* const* act, float32x4_t* acc) {
  constexpr int64_t kBlock = sizeof(BlockQ8_0);
  for (int64_t b = 0; b < blocks; ++b) {
    const float32x4_t wd = HalvesToFloat(LoadU16(w.scale[0] + b * w.scale_step), LoadU16(w.scale[1] + b * w.scale_step),
                                         LoadU16(w.scale[2] + b * w.scale_step), LoadU16(w.scale[3] + b * w.scale_step));
    float yd[8];
    TokenHalves<G>(act, b * kBlock, yd);
    int8x16_t y[G][2];
    float d[G][4];
    for (int t = 0; t < G; ++t) {
      const int8_t* p = reinterpret_cast<const int8_t*>(act[t] + b * kBlock + 2);
      y[t][0] = vld1q_s8(p);
      y[t][1] = vld1q_s8(p + 16);
      vst1q_f32(d[t], vmulq_n_f32(wd, yd[t]));
    }
    for (int k = 0; k < 4; ++k) {
      const int8_t* x = reinterpret_cast<const int8_t*>(w.quants[k] + b * w.quant_step);
      const int8x16_t x0 = vld1q_s8(x), x1 = vld1q_s8(x + 16);
      for (int t = 0; t < G; ++t) {
        const int32x4_t lo = vdotq_s32(vdupq_n_s32(0), x0, y[t][0]);
        const int32x4_t hi = vdotq_s32(vdupq_n_s32(0), x1, y[t][1]);
        float32x4_t* a = acc + (k * G + t) * 2;
        a[0] = vfmaq_n_f32(a[0], vcvtq_f32_s32(lo), d[t][k]);
        a[1] = vfmaq_n_f32(a[1], vcvtq_f32_s32(hi), d[t][k]);
      }
    }
  }
}

// VecDotQ8_0 for 4 rows x T tokens: chunk by chunk, tokens two at a time (the chunk's weights
// stay in L1 for the next pair), the lanes kept in acc between chunks.
template <int T, bool kI8mm, class Src>
void Q8_0Quad(const Src& w, const uint8_t* const* act, int64_t n, float32x4_t* out) {
  constexpr int64_t kBlock = sizeof(BlockQ8_0);
  float32x4_t acc[T][4][2];  // [token][row][half]
  for (int t = 0; t < T; ++t) {
    for (int k = 0; k < 4; ++k) acc[t][k][0] = acc[t][k][1] = vdupq_n_f32(0);
  }
  const int64_t nb = n / kQK;
  for (int64_t c = 0; c * kQ8_0ChunkBlocks < nb; ++c) {
    const int64_t b0 = c * kQ8_0ChunkBlocks;
    const int64_t blocks = nb - b0 < kQ8_0ChunkBlocks ? nb - b0 : kQ8_0ChunkBlocks;
    const Q8_0Chunk chunk = w.Chunk(c);
    for (int t = 0; t < T; t += 2) {
      const uint8_t* a[2] = {act[t] + b0 * kBlock, t + 1 < T ? act[t + 1] + b0 * kBlock : nullptr};
      if (t + 1 < T) {
        float32x4_t rr[16];
        for (int k = 0; k < 4; ++k) {
          rr[4 * k + 0] = acc[t][k][0], rr[4 * k + 1] = acc[t][k][1];
          rr[4 * k + 2] = acc[t + 1][k][0], rr[4 * k + 3] = acc[t + 1][k][1];
        }
        Q8_0ChunkRun<2>(chunk, blocks, a, rr);
        for (int k = 0; k < 4; ++k) {
          acc[t][k][0] = rr[4 * k + 0], acc[t][k][1] = rr[4 * k + 1];
          acc[t + 1][k][0] = rr[4 * k + 2], acc[t + 1][k][1] = rr[4 * k + 3];
        }
      } else {
        float32x4_t r[8];
        for (int k = 0; k < 4; ++k) r[2 * k] = acc[t][k][0], r[2 * k + 1] = acc[t][k][1];
        Q8_0ChunkRun<1>(chunk, blocks, a, r);
        for (int k = 0; k < 4; ++k) acc[t][k][0] = r[2 * k], acc[t][k][1] = r[2 * k + 1];
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const float32x4_t lo[4] = {acc[t][0][0], acc[t][1][0], acc[t][2][0], acc[t][3][0]};
    const float32x4_t hi[4] = {acc[t][0][1], acc[t][1][1], acc[t][2][1], acc[t][3][1]};
    out[t] = HorizontalSums4(lo, hi);
  }
}

// ---- Q6_K ---------------------------------------------------------------------------------

// Row k's block i at row[k] + i * step (as stored: step one block; packed in stripes of 8
// rows, Q6KPackedLayout: step 8 blocks).
struct Q6KRows {
  const uint8_t* row[4];
  int64_t step;
  const BlockQ6_K* Block(int k, int64_t i) const { return reinterpret_cast<const BlockQ6_K*>(row[k] + i * step); }
};

// VecDotQ6_K for 4 rows x T tokens: per row and super-block, the 16 vectors of u = q + 32 once,
// then for each token the 8 int32 lanes (scaled products less the bsums bias) and one FMA per
// lane.
template <int T, bool kI8mm>
void Q6KQuad(const Q6KRows& w, const uint8_t* const* act, int64_t n, float32x4_t* out) {
  float32x4_t acc[4][T][2];
  for (int k = 0; k < 4; ++k) {
    for (int t = 0; t < T; ++t) acc[k][t][0] = acc[k][t][1] = vdupq_n_f32(0);
  }
  const uint8x16_t low_mask = vdupq_n_u8(0x0f), two_bits = vdupq_n_u8(0x03);
  constexpr int64_t kActBlock = sizeof(BlockQ8_K);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int k = 0; k < 4; ++k) {
      const BlockQ6_K* x = w.Block(k, i);
      // u[8h + 2g + half]: elements 128h + 32g + 16 half .. + 15, as VecDotQ6_K makes them.
      int8x16_t u[16];
      for (int h = 0; h < 2; ++h) {
        const uint8_t* ql = x->ql + 64 * h;
        const uint8x16_t qh[2] = {vld1q_u8(x->qh + 32 * h), vld1q_u8(x->qh + 32 * h + 16)};
        for (int g = 0; g < 4; ++g) {
          const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * g));
          for (int half = 0; half < 2; ++half) {
            const uint8x16_t l4 = vld1q_u8(ql + 32 * (g & 1) + 16 * half);
            const uint8x16_t low = g >= 2 ? vshrq_n_u8(l4, 4) : vandq_u8(l4, low_mask);
            const uint8x16_t high = vandq_u8(vshlq_u8(qh[half], shift), two_bits);
            u[8 * h + 2 * g + half] = vreinterpretq_s8_u8(vorrq_u8(low, vshlq_n_u8(high, 4)));
          }
        }
      }
      const int8x16_t scales = vld1q_s8(x->scales);
      const int16x8_t s_lo = vmovl_s8(vget_low_s8(scales)), s_hi = vmovl_high_s8(scales);
      const float xd = Fp16ToFp32(x->d);
      for (int t = 0; t < T; ++t) {
        const uint8_t* yb = act[t] + i * kActBlock;
        const int8_t* yq = reinterpret_cast<const int8_t*>(yb + offsetof(BlockQ8_K, qs));
        int32x4_t sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
        for (int j = 0; j < 8; ++j) {  // j = 4h + g
          for (int half = 0; half < 2; ++half) {
            const int32x4_t dot = vdotq_s32(vdupq_n_s32(0), u[2 * j + half], vld1q_s8(yq + 32 * j + 16 * half));
            sum[half] = vmlaq_n_s32(sum[half], dot, x->scales[2 * j + half]);
          }
        }
        // bias[m] = 32 * (bsums[2m] * s[2m] + bsums[2m+1] * s[2m+1]), m = 0..7.
        int16_t bs[16];
        std::memcpy(bs, yb + offsetof(BlockQ8_K, bsums), sizeof bs);
        const int16x8_t b_lo = vld1q_s16(bs), b_hi = vld1q_s16(bs + 8);
        const int32x4_t bias_lo = vpaddq_s32(vmull_s16(vget_low_s16(b_lo), vget_low_s16(s_lo)), vmull_high_s16(b_lo, s_lo));
        const int32x4_t bias_hi = vpaddq_s32(vmull_s16(vget_low_s16(b_hi), vget_low_s16(s_hi)), vmull_high_s16(b_hi, s_hi));
        float yd;
        std::memcpy(&yd, yb, 4);
        const float d = yd * xd;
        acc[k][t][0] = vfmaq_n_f32(acc[k][t][0], vcvtq_f32_s32(vsubq_s32(sum[0], vshlq_n_s32(bias_lo, 5))), d);
        acc[k][t][1] = vfmaq_n_f32(acc[k][t][1], vcvtq_f32_s32(vsubq_s32(sum[1], vshlq_n_s32(bias_hi, 5))), d);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const float32x4_t lo[4] = {acc[0][t][0], acc[1][t][0], acc[2][t][0], acc[3][t][0]};
    const float32x4_t hi[4] = {acc[0][t][1], acc[1][t][1], acc[2][t][1], acc[3][t][1]};
    out[t] = HorizontalSums4(lo, hi);
  }
}

// ---- Tiles of 16 rows (WideTileFn) and of up to 4 rows (TileFn) ----------------------------

enum class Layout { kRows, kPacked };

// The quad kernel of `type` for 4 rows x T tokens, rows as Quad(q) of the 16 (or given rows).
template <DType kType, bool kGrouped, bool kI8mm>
struct QuadKernel {
  template <int T, class Src>
  static void Run(const Src& src, const uint8_t* const* act, int64_t n, float32x4_t* out) {
    if constexpr (kType == DType::kQ4_0) {
      for (int t = 0; t < T; ++t) out[t] = vdupq_n_f32(0);
      Q4_0Quad<T, kI8mm>(src, Q4_0Acts<T, kI8mm>{act}, act, 0, n / kQK, out);
    } else if constexpr (kType == DType::kQ8_0) {
      Q8_0Quad<T, kI8mm>(src, act, n, out);
    } else if constexpr (kType == DType::kQ4_K) {
      float32x4_t acc[2 * T];
      for (int t = 0; t < 2 * T; ++t) acc[t] = vdupq_n_f32(0);
      Q4KQuad<T, kI8mm, kGrouped>(src, Q4KActs<T, kI8mm>{act}, act, 0, n / kQK_K, acc);
      for (int t = 0; t < T; ++t) out[t] = vsubq_f32(acc[t], acc[T + t]);
    } else {
      Q6KQuad<T, kI8mm>(src, act, n, out);
    }
  }
};

// The source of 4 rows as stored (row pointers).
template <DType kType>
auto RowsSource(const uint8_t* const* rows) {
  if constexpr (kType == DType::kQ4_0) {
    return Q4_0Rows{{rows[0], rows[1], rows[2], rows[3]}};
  } else if constexpr (kType == DType::kQ4_K) {
    return Q4KRows{{rows[0], rows[1], rows[2], rows[3]}};
  } else if constexpr (kType == DType::kQ8_0) {
    return Q8_0Rows{{rows[0], rows[1], rows[2], rows[3]}};
  } else {
    return Q6KRows{{rows[0], rows[1], rows[2], rows[3]}, static_cast<int64_t>(sizeof(BlockQ6_K))};
  }
}

// The source of quad q (rows 4q..4q+3) of a wide tile.
template <DType kType, Layout kLayout>
auto WideQuadSource(const uint8_t* w, int64_t w_stride, int q, int64_t n) {
  if constexpr (kLayout == Layout::kPacked) {
    if constexpr (kType == DType::kQ4_0) {
      return Q4_0Packed{w, q};
    } else if constexpr (kType == DType::kQ4_K) {
      return Q4KPacked{w, q};
    } else if constexpr (kType == DType::kQ8_0) {
      return Q8_0Packed{w, q, Q8_0PackedLayout{n / kQK}};
    } else {
      const Q6KPackedLayout layout{n / kQK_K};
      Q6KRows r{};
      for (int k = 0; k < 4; ++k) r.row[k] = w + layout.Block(4 * q + k, 0);
      r.step = kQ6KStripeRows * layout.kBlockBytes;
      return r;
    }
  } else {
    const uint8_t* rows[4];
    for (int k = 0; k < 4; ++k) rows[k] = w + (4 * q + k) * w_stride;
    return RowsSource<kType>(rows);
  }
}

template <DType kType, bool kGrouped, bool kI8mm, Layout kLayout>
struct WideKernel {
  template <int T>
  static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, const float*,
                  int64_t, int64_t n, float* out, int64_t out_stride) {
    const uint8_t* tokens[T];
    for (int t = 0; t < T; ++t) tokens[t] = act + t * act_stride;
    if constexpr (kI8mm && (kType == DType::kQ4_0 || kType == DType::kQ4_K)) {
      RunZipped<T>(w, w_stride, tokens, n, out, out_stride);
    } else {
      for (int q = 0; q < kWideRows / 4; ++q) {
        float32x4_t r[T];
        QuadKernel<kType, kGrouped, kI8mm>::template Run<T>(WideQuadSource<kType, kLayout>(w, w_stride, q, n), tokens,
                                                             n, r);
        for (int t = 0; t < T; ++t) vst1q_f32(out + t * out_stride + 4 * q, r[t]);
      }
    }
  }
  // I8mm, Q4_0 and Q4_K: chunk by chunk of blocks, the tokens interleaved by pairs once per
  // chunk for the four quads, whose accumulators wait in acc between chunks.
  template <int T>
  static void RunZipped(const uint8_t* w, int64_t w_stride, const uint8_t* const* tokens, int64_t n, float* out,
                        int64_t out_stride) {
    constexpr bool kQ4_0 = kType == DType::kQ4_0;
    constexpr int64_t kChunk = kQ4_0 ? 32 : 4;
    constexpr int kStates = kQ4_0 ? T : 2 * T;
    using Zipped = std::conditional_t<kQ4_0, ActZipped<T, sizeof(BlockQ8_0), 2, 2, kChunk>,
                                      ActZipped<T, sizeof(BlockQ8_K), offsetof(BlockQ8_K, qs), 16, kChunk>>;
    Zipped acts;
    float32x4_t acc[kWideRows / 4][kStates];
    for (auto& quad : acc) {
      for (float32x4_t& a : quad) a = vdupq_n_f32(0);
    }
    const int64_t nb = kQ4_0 ? n / kQK : n / kQK_K;
    for (int64_t i0 = 0; i0 < nb; i0 += kChunk) {
      const int64_t i1 = nb - i0 < kChunk ? nb : i0 + kChunk;
      acts.Fill(tokens, i0, i1 - i0);
      for (int q = 0; q < kWideRows / 4; ++q) {
        const auto src = WideQuadSource<kType, kLayout>(w, w_stride, q, n);
        if constexpr (kQ4_0) {
          Q4_0Quad<T, true>(src, acts, tokens, i0, i1, acc[q]);
        } else {
          Q4KQuad<T, true, kGrouped>(src, acts, tokens, i0, i1, acc[q]);
        }
      }
    }
    for (int q = 0; q < kWideRows / 4; ++q) {
      for (int t = 0; t < T; ++t) {
        const float32x4_t r = kQ4_0 ? acc[q][t] : vsubq_f32(acc[q][t], acc[q][kStates - T + t]);
        vst1q_f32(out + t * out_stride + 4 * q, r);
      }
    }
  }
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, int64_t, const float*, int64_t, int64_t, float*,
                      int64_t);
  template <int... Ts>
  static constexpr std::array<Fn, sizeof...(Ts)> Table(std::integer_sequence<int, Ts...>) {
    return {&Run<Ts + 1>...};
  }
  static constexpr auto kFns = Table(std::make_integer_sequence<int, kWideTokens>{});
  static void Call(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, const float* side,
                   int64_t side_stride, int n_tokens, int64_t n, float* out, int64_t out_stride) {
    kFns[n_tokens - 1](w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
  }
};

template <DType kType, bool kGrouped, bool kI8mm>
struct ShortTile {
  template <int T>
  static void Run(const uint8_t* w, int64_t w_stride, int n_rows, const uint8_t* act, int64_t act_stride, int64_t n,
                  float* out, int64_t out_stride) {
    const uint8_t* rows[4];
    for (int k = 0; k < 4; ++k) rows[k] = w + (k < n_rows ? k : n_rows - 1) * w_stride;  // repeats the last row
    const uint8_t* tokens[T];
    for (int t = 0; t < T; ++t) tokens[t] = act + t * act_stride;
    float32x4_t r[T];
    QuadKernel<kType, kGrouped, kI8mm>::template Run<T>(RowsSource<kType>(rows), tokens, n, r);
    for (int t = 0; t < T; ++t) {
      if (n_rows == 4) {
        vst1q_f32(out + t * out_stride, r[t]);
      } else {
        float lanes[4];
        vst1q_f32(lanes, r[t]);
        for (int k = 0; k < n_rows; ++k) out[t * out_stride + k] = lanes[k];
      }
    }
  }
  template <int... Ts>
  static constexpr std::array<void (*)(const uint8_t*, int64_t, int, const uint8_t*, int64_t, int64_t, float*, int64_t),
                              sizeof...(Ts)>
  Table(std::integer_sequence<int, Ts...>) {
    return {&Run<Ts + 1>...};
  }
  static constexpr auto kFns = Table(std::make_integer_sequence<int, kTileTokens>{});
  static void Call(const uint8_t* w, int64_t w_stride, int n_rows, const uint8_t* act, int64_t act_stride,
                   int n_tokens, int64_t n, float* out, int64_t out_stride) {
    kFns[n_tokens - 1](w, w_stride, n_rows, act, act_stride, n, out, out_stride);
  }
};

template <bool kI8mm, bool kGrouped, Layout kLayout>
WideTileFn WideFn(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return WideKernel<DType::kQ4_0, kGrouped, kI8mm, kLayout>::Call;
    case DType::kQ8_0: return WideKernel<DType::kQ8_0, kGrouped, kI8mm, kLayout>::Call;
    case DType::kQ4_K: return WideKernel<DType::kQ4_K, kGrouped, kI8mm, kLayout>::Call;
    case DType::kQ6_K: return WideKernel<DType::kQ6_K, kGrouped, kI8mm, kLayout>::Call;
    default: return nullptr;
  }
}

template <bool kI8mm, bool kGrouped>
TileFn ShortFn(DType weight) {
  switch (weight) {
    case DType::kQ4_0: return ShortTile<DType::kQ4_0, kGrouped, kI8mm>::Call;
    case DType::kQ8_0: return ShortTile<DType::kQ8_0, kGrouped, kI8mm>::Call;
    case DType::kQ4_K: return ShortTile<DType::kQ4_K, kGrouped, kI8mm>::Call;
    case DType::kQ6_K: return ShortTile<DType::kQ6_K, kGrouped, kI8mm>::Call;
    default: return nullptr;
  }
}

}  // namespace

template <bool kI8mm>
WideTile WideTileOf(DType weight, bool grouped, bool packed) {
  // Only Q4_K's grouped order differs (GetVecDotGrouped); the others share one kernel.
  const bool g = grouped && weight == DType::kQ4_K;
  WideTileFn fn;
  if (packed) {
    fn = g ? WideFn<kI8mm, true, Layout::kPacked>(weight) : WideFn<kI8mm, false, Layout::kPacked>(weight);
  } else {
    fn = g ? WideFn<kI8mm, true, Layout::kRows>(weight) : WideFn<kI8mm, false, Layout::kRows>(weight);
  }
  if (fn == nullptr) return {};
  return {fn, nullptr, 0, kWideTokens};
}

template <bool kI8mm>
TileFn QuadTileOf(DType weight, bool grouped) {
  return grouped && weight == DType::kQ4_K ? ShortFn<kI8mm, true>(weight) : ShortFn<kI8mm, false>(weight);
}

}  // namespace cohort::kernels::neon

#endif  // __aarch64__
