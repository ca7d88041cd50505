// Loads for the AVX-512 wide tile kernels (tile_wide.h): 16 weight rows read at one byte
// offset and transposed in registers so that lane r of each result belongs to row r.
// Internal to src/kernels.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <array>
#include <cstring>
#include <utility>

#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels::x86 {

inline int32_t LoadInt(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// 16 consecutive rows w + r * stride, r = 0..15.
class WideRows {
 public:
  COHORT_TARGET_AVX512 WideRows(const uint8_t* w, int64_t stride)
      : w_(w), stride_(stride), stride3_(3 * stride), quad_{w, w + 4 * stride, w + 8 * stride, w + 12 * stride} {
    index_ = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                _mm512_set1_epi32(static_cast<int>(stride)));
  }

  // q[c] lane r = the 32-bit word at byte off + 4c of row r, c = 0..3 (16 bytes per row).
  COHORT_TARGET_AVX512 void Load16x16(int64_t off, __m512i q[4]) const {
    // z[b]'s 128-bit lane a holds row 4a + b; a 4x4 transpose of 32-bit words within each
    // 128-bit lane then leaves word c of rows 4a..4a+3 in lane a of q[c].
    // Masked broadcasts, not inserts: they run in the load and blend units, leaving the
    // shuffle units (the bottleneck here) to the transpose.
    const uint8_t* p[4];
    for (int a = 0; a < 4; ++a) p[a] = quad_[a] + off;
    __m512i z[4];
    for (int b = 0; b < 4; ++b) {
      __m512i v = _mm512_broadcast_i32x4(Load16(p[0], b));
      v = _mm512_mask_broadcast_i32x4(v, 0x00f0, Load16(p[1], b));
      v = _mm512_mask_broadcast_i32x4(v, 0x0f00, Load16(p[2], b));
      z[b] = _mm512_mask_broadcast_i32x4(v, 0xf000, Load16(p[3], b));
    }
    const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]);
    const __m512i t1 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]);
    const __m512i t3 = _mm512_unpackhi_epi32(z[2], z[3]);
    q[0] = _mm512_unpacklo_epi64(t0, t2);
    q[1] = _mm512_unpackhi_epi64(t0, t2);
    q[2] = _mm512_unpacklo_epi64(t1, t3);
    q[3] = _mm512_unpackhi_epi64(t1, t3);
  }

  // Lane r = the 32-bit word at byte off of row r.
  COHORT_TARGET_AVX512 __m512i Words(int64_t off) const {
    return _mm512_i32gather_epi32(index_, w_ + off, 1);
  }

  // Lane r = the fp16 at byte off of row r, as a float (the same conversion as HalfToFloat).
  // Scalar loads into lanes: a gather of 16 lanes costs more than these 16 inserts.
  COHORT_TARGET_AVX512 __m512 Halves(int64_t off) const {
    // Four halves per 64-bit word in general registers, so only 4 words cross into vectors.
    long long q[4];
    for (int a = 0; a < 4; ++a) {
      const uint8_t* p = quad_[a] + off;
      q[a] = static_cast<long long>(Half(p) | Half(p + stride_) << 16 | Half(p + 2 * stride_) << 32 |
                                    Half(p + stride3_) << 48);
    }
    return _mm512_cvtph_ps(_mm256_setr_epi64x(q[0], q[1], q[2], q[3]));
  }

  // Software prefetch into L2 of the next 16 rows (the caller's next tile), the share of them
  // that goes with block i: 16 row streams at once defeat the hardware prefetcher.
  void PrefetchNext(int64_t i, int64_t block_bytes) const { PrefetchNextPart(i, block_bytes, 0, 1); }

  // Part `part` of `parts` of PrefetchNext's lines: a large block's loop spreads them over
  // its steps, as a burst of dozens of prefetches overflows the core's queue of misses.
  void PrefetchNextPart(int64_t i, int64_t block_bytes, int part, int parts) const {
    const uint8_t* next = w_ + 16 * stride_ + 16 * block_bytes * i;
    const int64_t lines = (16 * block_bytes + 63) / 64;
    for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(next + 64 * l), _MM_HINT_T1);
    }
  }

 private:
  static uint64_t Half(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  // Row k (0..3) of the quad of rows starting at p.
  COHORT_TARGET_AVX512 __m128i Load16(const uint8_t* p, int k) const {
    const int64_t step = k == 0 ? 0 : k == 1 ? stride_ : k == 2 ? 2 * stride_ : stride3_;
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + step));
  }

  const uint8_t* w_;
  int64_t stride_, stride3_;
  const uint8_t* quad_[4];  // rows 0, 4, 8, 12
  __m512i index_;
};

// A group of 16 rows packed by PackRows (pack.h): its blocks, kBlockBytes each (16 rows'
// worth), one after another, the next group group_stride bytes on.
// kPrefetchPacked(T): whether a kernel for T tokens prefetches the next group into L2 as it
// goes. A thread's groups follow one another in memory (ThreadPool::ParallelFor gives each
// thread one contiguous share); at 1 token, where the kernel is bound by memory, prefetching
// a whole group ahead cost a fifth of the bandwidth when memory runs at its fastest (2048 x
// 8192 Q4_0, 2 threads: 53 GB/s with it, 67-69 without), and the single-token kernels take
// PrefetchPageAhead / PrefetchLinesAhead instead. With more tokens the kernel is bound by
// compute and the prefetch pays: 8 streams served 128-142 tok/s with it, 95-116 without.
constexpr bool kPrefetchPacked(int tokens) { return tokens > 1; }
// Software prefetch for the single-token passes over packed weights, which memory bounds. A
// thread's share of a packed matrix is one stream, but the hardware prefetchers stop at every
// 4 KiB page boundary, so each new page begins with a demand miss (and a TLB miss) that the
// out-of-order window, a couple of KB of weights deep in these kernels, cannot hide: without
// help the kernels read at 60-85% of a plain read loop's speed. Two kinds of prefetch:
// - PrefetchPageAhead, the first line of each page kPageAheadBytes on (one prefetch per 4 KiB);
// - PrefetchLinesAhead, every line kLinesAheadBytes on, on top, where the kernel's loads are
//   whole aligned lines (Q4_K, Q8_0; for Q4_0 and Q6_K, whose loads straddle lines, it costs
//   more than it gives).
// Chosen by a sweep on 256 MiB matrices 2048 wide, 2 threads, medians of 5 runs spread over
// both of this VM's memory modes, as the ratio to a plain read loop (which has the same stalls,
// hence ratios above 1): Q4_0 0.84 -> 1.22 and Q6_K 0.82 -> 1.11 (page, 16 KiB), Q4_K 0.65 ->
// 1.16 and Q8_0 0.67 -> 1.15 (page 8 KiB and lines 2 KiB). These kernels against the previous
// ones, alternated in the slow mode: Q4_0 0.93 -> 1.11, Q4_K 0.83 -> 1.14, Q8_0 0.87 -> 1.15,
// Q6_K 0.87 (rows as stored) -> 1.06. Written as asm: GCC 12 dropped the __builtin_prefetch of
// an earlier form of these helpers, leaving no instruction in the object code.
inline constexpr int64_t kPageAheadBytes = 16384;
inline constexpr int64_t kLinesAheadBytes = 2048;

inline void PrefetchLine(const uint8_t* p) { asm volatile("prefetcht0 %0" : : "m"(*p)); }

// For a kernel step that reads [run, run + bytes) of its stream: the first line of the page,
// if any, that begins in the same range kPageAheadBytes on.
inline void PrefetchPageAhead(const uint8_t* run, int64_t bytes) {
  const uintptr_t ahead = reinterpret_cast<uintptr_t>(run) + kPageAheadBytes;
  const uintptr_t page = (ahead + bytes - 1) & ~uintptr_t{4095};
  if (page >= ahead) PrefetchLine(reinterpret_cast<const uint8_t*>(page));
}

// Part `part` of `parts` of the lines of [run, run + bytes) kLinesAheadBytes on: a step that
// reads a large block spreads them over its parts.
inline void PrefetchLinesAhead(const uint8_t* run, int64_t bytes, int part, int parts) {
  const int64_t lines = (bytes + 63) / 64;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l) {
    PrefetchLine(run + kLinesAheadBytes + 64 * l);
  }
}

// Side data of a Q8_K activation row for the K-quant wide kernels of both x86 ISAs: per
// super-block 4 words, word k = the int16 pair (bsum pair 2k, bsum pair 2k + 1), where bsum
// pair j = bsums[2j] + bsums[2j + 1] covers sub-block j (32 elements); a madd (AVX2) or dpwssd
// (AVX-512) against the rows' (min 2k, min 2k + 1) pairs gives the mins term.
inline constexpr int kQ8KSideWords = 4;

inline void SideQ8_K(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_K*>(act_row);
  auto* out = reinterpret_cast<uint32_t*>(side);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int k = 0; k < kQ8KSideWords; ++k) {
      const int16_t* bs = y[i].bsums + 4 * k;
      const auto lo = static_cast<uint16_t>(bs[0] + bs[1]);
      const auto hi = static_cast<uint16_t>(bs[2] + bs[3]);
      out[i * kQ8KSideWords + k] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
}

template <int64_t kBlockBytes>
class PackedGroup {
 public:
  PackedGroup(const uint8_t* w, int64_t group_stride) : w_(w), next_(w + group_stride) {}
  const uint8_t* Block(int64_t i) const { return w_ + i * kBlockBytes; }
  // Part `part` of `parts` of the prefetch into L2 of the next group's block i.
  void PrefetchNextPart(int64_t i, int part, int parts) const {
    constexpr int64_t kLines = (kBlockBytes + 63) / 64;
    for (int64_t l = kLines * part / parts; l < kLines * (part + 1) / parts; ++l) {
      _mm_prefetch(reinterpret_cast<const char*>(next_ + i * kBlockBytes + 64 * l), _MM_HINT_T1);
    }
  }

 private:
  const uint8_t* w_;
  const uint8_t* next_;
};

// One WideTileFn for 1..kMax tokens over Kernel<T>::Run (T tokens, a compile-time count).
template <template <int> class Kernel, int kMax>
struct WideTable {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, int64_t, const float*, int64_t,
                      int64_t, float*, int64_t);
  template <int... Ts>
  static constexpr std::array<Fn, kMax> Make(std::integer_sequence<int, Ts...>) {
    return {&Kernel<Ts + 1>::Run...};
  }
  static constexpr std::array<Fn, kMax> kFns = Make(std::make_integer_sequence<int, kMax>{});
};

template <template <int> class Kernel, int kMax>
void WideRun(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
             const float* side, int64_t side_stride, int n_tokens, int64_t n, float* out,
             int64_t out_stride) {
  WideTable<Kernel, kMax>::kFns[n_tokens - 1](w, w_stride, act, act_stride, side, side_stride, n,
                                              out, out_stride);
}

}  // namespace cohort::kernels::x86

#endif
