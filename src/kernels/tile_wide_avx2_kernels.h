// The AVX2 wide tile kernels for Q4_0 and Q8_0 (tile_wide.h), written once for both x86
// levels that run them: tile_wide_avx2.cc includes this file twice, in a namespace of its own
// each time, with COHORT_TILE_TARGET the target attribute and kVnni whether the 256-bit VEX
// vpdpbusd (AVX-VNNI) takes the place of maddubs + madd. Everything else, the loads, the
// orders and the float steps, is one code for both. Internal to tile_wide_avx2.cc: no include
// guard, no includes (the includer has them), and only meant to be included inside a
// namespace that defines kVnni and COHORT_TILE_TARGET.

// ---- Q4_0: 16 rows as two halves of 8 int32 lanes, lane r = row r ----
//
// Per block and row the exact integer sum of (q - 8) * y, then, as VecDotQ4_0 (vec_dot_avx2.cc)
// does for its one row, acc = fma(float(sum), d_w * d_a, acc): lane r of acc does row r's
// scalar steps. The integer sum: the unsigned nibbles times the activation, plus -8 * sum(y)
// from the side data. Without VNNI the 8 maddubs products of a (half, token, block) are summed
// as int16 (each at most 2 * 15 * 128, eight of them 30720 < 32767: exact) and widened by one
// madd; with VNNI each dpbusd adds straight into the int32 sum.

// The most tokens one call takes.
inline constexpr int kQ4_0MaxTokens = 8;

// Side data of a Q8_0 activation row for Q4_0 weights: per block its scale as a float and
// -8 * sum(qs), both shared by all rows.
struct Q4_0Side {
  float d;
  int32_t neg8_sum;
};
static_assert(sizeof(Q4_0Side) == 2 * sizeof(float));

COHORT_TILE_TARGET void SideQ4_0(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  auto* out = reinterpret_cast<Q4_0Side*>(side);
  for (int64_t i = 0; i < n / kQK; ++i) {
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += y[i].qs[j];
    out[i].d = x86::HalfToFloat(y[i].d);
    out[i].neg8_sum = -8 * sum;
  }
}

// q[c] lane r: bytes 4c..4c+3 of the 16 quant bytes at p + r * stride, r < 8. a[k] holds row
// k in the low 128 bits and row k + 4 in the high; a 4x4 transpose of 32-bit words within each
// 128-bit lane then leaves word c of rows 0..3 | 4..7 in q[c].
COHORT_TILE_TARGET inline void TransposeQuants8(const uint8_t* p, int64_t stride, __m256i q[4]) {
  __m256i a[4];
  for (int k = 0; k < 4; ++k) {
    const __m128i low = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + k * stride));
    const __m128i high = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (k + 4) * stride));
    a[k] = _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
  }
  const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]);
  const __m256i t1 = _mm256_unpackhi_epi32(a[0], a[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]);
  const __m256i t3 = _mm256_unpackhi_epi32(a[2], a[3]);
  q[0] = _mm256_unpacklo_epi64(t0, t2);
  q[1] = _mm256_unpackhi_epi64(t0, t2);
  q[2] = _mm256_unpacklo_epi64(t1, t3);
  q[3] = _mm256_unpackhi_epi64(t1, t3);
}

// Software prefetch into L2 of the next 16 rows (the caller's next tile), the share of them
// that goes with block i (block_bytes per row): 16 row streams at once defeat the hardware
// prefetcher.
inline void PrefetchNextRows(const uint8_t* w, int64_t stride, int64_t block_bytes, int64_t i) {
  const int64_t bytes = kWideRows * block_bytes;
  const uint8_t* next = w + kWideRows * stride + bytes * i;
  for (int64_t l = 0; l < (bytes + 63) / 64; ++l) _mm_prefetch(reinterpret_cast<const char*>(next + 64 * l), _MM_HINT_T1);
}

// The rows' Q4_0 blocks as stored, 8 rows at a time transposed in registers.
class Q4_0Rows {
 public:
  COHORT_TILE_TARGET Q4_0Rows(const uint8_t* w, int64_t w_stride) : w_(w), stride_(w_stride) {}
  // The nibbles as the kernel's unsigned bytes, the seed of -8 x sum(y) that makes the sum true,
  // and whether the int16 pair sums must be widened per half (see Mxfp4Rows).
  COHORT_TILE_TARGET static __m256i Map(__m256i nibbles) { return nibbles; }
  static int32_t Seed(int32_t neg8_sum) { return neg8_sum; }
  static constexpr bool kWidenHalves = false;

  // q[c] lane r: bytes 4c..4c+3 of block i's qs in row 8h + r; returns those rows' d_w.
  template <int T>
  COHORT_TILE_TARGET __m256 Half(int64_t i, int h, __m256i q[4]) const {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ4_0));
    if (h == 0) PrefetchNextRows(w_, stride_, sizeof(BlockQ4_0), i);
    const uint8_t* r0 = w_ + 8 * h * stride_ + off;
    TransposeQuants8(r0 + 2, stride_, q);
    // Four halves per 64-bit word in general registers, then one vcvtph2ps (HalfToFloat's).
    long long s[2];
    for (int k = 0; k < 2; ++k) {
      const uint8_t* p = r0 + 4 * k * stride_;
      s[k] = static_cast<long long>(Scale(p) | Scale(p + stride_) << 16 | Scale(p + 2 * stride_) << 32 |
                                    Scale(p + 3 * stride_) << 48);
    }
    return _mm256_cvtph_ps(_mm_set_epi64x(s[1], s[0]));
  }

 private:
  static uint64_t Scale(const uint8_t* p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }

  const uint8_t* w_;
  int64_t stride_;
};

// The group's Q4_0 blocks packed (PackRows, pack.h): block i is 16 scales, then the words q[c]
// of all 16 rows, c = 0..3, 64 bytes each (rows 0..7 in the first 32): plain loads.
// No page-ahead prefetch in the AVX2 single-token passes (x86::PrefetchPageAhead, which the
// AVX-512 kernels keep, measured on their machine): on the AVX2 machine they were measured on
// (AMD EPYC, 2 threads, cohort bench tg32, alternating) it cost 12-27%: 1B Q4_0 14.7 -> 17.4
// tok/s without it, Q4_K_M 14.6 -> 17.9, the MoE mini 17.7 -> 19.5, Q8_0 9.2 -> 9.7.
class Q4_0Packed {
 public:
  static constexpr int64_t kBlockBytes = kWideRows * static_cast<int64_t>(sizeof(BlockQ4_0));
  // w: the group's first block; group_stride: bytes to the next group.
  COHORT_TILE_TARGET Q4_0Packed(const uint8_t* w, int64_t group_stride) : group_(w, group_stride) {}
  COHORT_TILE_TARGET static __m256i Map(__m256i nibbles) { return nibbles; }
  static int32_t Seed(int32_t neg8_sum) { return neg8_sum; }
  static constexpr bool kWidenHalves = false;

  template <int T>
  COHORT_TILE_TARGET __m256 Half(int64_t i, int h, __m256i q[4]) const {
    const uint8_t* b = group_.Block(i);
    if (h == 0) {
      if constexpr (x86::kPrefetchPacked(T)) group_.PrefetchNextPart(i, 0, 1);
    }
    for (int c = 0; c < 4; ++c) q[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 32 + 64 * c + 32 * h));
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * h)));
  }

 private:
  x86::PackedGroup<kBlockBytes> group_;
};

// MXFP4's rows as stored (blocks of an E8M0 exponent and Q4_0's nibble layout), as the
// AVX-512 Mxfp4Rows: the nibbles become their doubled e2m1 values + 16 by one byte shuffle (so
// the seed is -16 x sum(y)), the exponents the half scales Mxfp4HalfScale, in lanes. The
// vec-dot's order (vec_dot_avx2_mxfp4.cc: per block the exact integer sum, then
// acc = fma(sum, scale * d_a, acc)) is Q4_0's. Without VNNI a half's 4 maddubs pair sums reach
// 4 x 2 x 28 x 127 = 28448, so each half is widened alone (two halves would overflow int16).
class Mxfp4Rows {
 public:
  COHORT_TILE_TARGET Mxfp4Rows(const uint8_t* w, int64_t w_stride) : w_(w), stride_(w_stride) {}
  COHORT_TILE_TARGET static __m256i Map(__m256i nibbles) {
    const __m256i table = _mm256_setr_epi32(0x13121110, 0x1c181614, 0x0d0e0f10, 0x04080a0c, 0x13121110, 0x1c181614,
                                            0x0d0e0f10, 0x04080a0c);
    return _mm256_shuffle_epi8(table, nibbles);
  }
  static int32_t Seed(int32_t neg8_sum) { return 2 * neg8_sum; }
  static constexpr bool kWidenHalves = true;

  template <int T>
  COHORT_TILE_TARGET __m256 Half(int64_t i, int h, __m256i q[4]) const {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockMxfp4));
    if (h == 0) PrefetchNextRows(w_, stride_, sizeof(BlockMxfp4), i);
    const uint8_t* r0 = w_ + 8 * h * stride_ + off;
    TransposeQuants8(r0 + 1, stride_, q);
    // The 8 rows' exponents, then 2^(e - 128): exponent field e - 1, or for e = 0 and 1 the
    // subnormals 2^-128 and 2^-127 (Mxfp4HalfScale's values).
    uint64_t bytes = 0;
    for (int r = 0; r < 8; ++r) bytes |= static_cast<uint64_t>(r0[r * stride_]) << (8 * r);
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(bytes)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
  }

 private:
  const uint8_t* w_;
  int64_t stride_;
};

// Lanes += the sums of 4 adjacent products of the unsigned bytes u and the signed bytes s.
// Without VNNI the products come back as 16 int16 pair sums (the caller widens them once).
COHORT_TILE_TARGET inline __m256i DotStep(__m256i acc, __m256i u, __m256i s) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_avx_epi32(acc, u, s);
  } else {
    return _mm256_add_epi16(acc, _mm256_maddubs_epi16(u, s));
  }
}

template <class Source, int T>
COHORT_TILE_TARGET void WideQ4_0(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                 int64_t act_stride, const float* side, int64_t side_stride,
                                 int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK;
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const Source rows(w, w_stride);
  __m256 acc[2][T];
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < T; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    for (int h = 0; h < 2; ++h) {
      __m256i q[4];
      const __m256 dw = rows.template Half<T>(i, h, q);
      // The half's nibbles stay in 8 registers while every token passes over them.
      __m256i lo[4], hi[4];
      for (int c = 0; c < 4; ++c) {
        lo[c] = Source::Map(_mm256_and_si256(q[c], low_mask));
        hi[c] = Source::Map(_mm256_and_si256(_mm256_srli_epi16(q[c], 4), low_mask));
      }
      for (int t = 0; t < T; ++t) {
        const uint8_t* y = act + t * act_stride + i * static_cast<int64_t>(sizeof(BlockQ8_0)) + 2;
        const auto& s = reinterpret_cast<const Q4_0Side*>(side + t * side_stride)[i];
        // Two chains: they hide dpbusd's latency (maddubs's products are independent anyway).
        const int32_t seed = Source::Seed(s.neg8_sum);
        __m256i sum_lo = kVnni ? _mm256_set1_epi32(seed) : _mm256_setzero_si256();
        __m256i sum_hi = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
          sum_lo = DotStep(sum_lo, lo[c], _mm256_set1_epi32(x86::LoadInt(y + 4 * c)));
          sum_hi = DotStep(sum_hi, hi[c], _mm256_set1_epi32(x86::LoadInt(y + 16 + 4 * c)));
        }
        __m256i sum;
        if constexpr (kVnni) {
          sum = _mm256_add_epi32(sum_lo, sum_hi);
        } else if constexpr (Source::kWidenHalves) {
          const __m256i ones = _mm256_set1_epi16(1);
          sum = _mm256_add_epi32(_mm256_madd_epi16(sum_lo, ones), _mm256_madd_epi16(sum_hi, ones));
          sum = _mm256_add_epi32(sum, _mm256_set1_epi32(seed));
        } else {
          sum = _mm256_madd_epi16(_mm256_add_epi16(sum_lo, sum_hi), _mm256_set1_epi16(1));
          sum = _mm256_add_epi32(sum, _mm256_set1_epi32(seed));
        }
        const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(s.d));
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[h][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    _mm256_storeu_ps(out + t * out_stride, acc[0][t]);
    _mm256_storeu_ps(out + t * out_stride + 8, acc[1][t]);
  }
}

template <class Source>
struct Q4_0Kernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ4_0<Source, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

// ---- Q8_0: one row per ymm register, lane m = the vec-dot's int32 lane m ----
//
// VecDotQ8_0 keeps 8 float lanes per row: per block the 8 int32 sums of 4 products, then
// acc = fma(d_w * d_a, float(sum), acc), and HorizontalSum at the end. Here each (row, token)
// has its own ymm accumulator doing exactly that. The integer sums: without VNNI as the
// vec-dot's DotSignedBytes (|x| times y with x's sign, maddubs then madd); with VNNI the
// signed weights go into dpbusd as x + 128 (unsigned), seeded by -128 * (the activation's
// sums of 4, side data): the same exact int32 lanes. The rows go in quads (the packed layout's
// unit, Q8_0PackedLayout), each quad in passes of Q8_0PassRows(T) rows over a chunk of
// kQ8_0ChunkBlocks blocks, so a pass's accumulators stay in the 16 ymm registers; d_w * d_a
// is made per chunk in a pass of its own, so the FMAs take it from memory as a broadcast.

// Rows per pass: a single token's pass takes the whole quad (one activation load for 4 rows);
// more tokens take 2 rows, so the 2 x T accumulators stay in registers.
constexpr int Q8_0PassRows(int tokens) { return tokens == 1 ? 4 : 2; }
// Without VNNI 5 tokens a call: 2 rows x 5 tokens of accumulators, the rows' words and signs
// and a token's activation fill the 16 ymm registers. Measured on Zen 5 at COHORT_SIMD=avx2
// (1B Q8_0 pp512, 2 threads, 3 alternating rounds): 119-122 tok/s, against 108-109 for a
// kernel of int16 words (two madds per block, up to 8 tokens a pass, one row at a time) and
// 115-118 for this one at 8 tokens a pass of one row; widening maddubs's pairs by shifts
// instead of madd cost a fifth (86 tok/s): the vector ALU ports, not the multipliers, bind.
// With VNNI dpbusd is one instruction and 4 tokens are enough.
inline constexpr int kQ8_0MaxTokens = kVnni ? 4 : 5;
// Side data floats per block: the scale as a float, then with VNNI the 8 seeds.
inline constexpr int kQ8_0SideWords = kVnni ? 9 : 1;
// Block i's scale in a token's side data.
COHORT_TILE_TARGET inline float Q8_0SideScale(const float* side, int64_t i) { return side[kQ8_0SideWords * i]; }

// Quad g's part of the chunk of blocks from block i0: where block i0 + j of the quad's row r
// lies, its scale at scales + r * scale_row + j * scale_block, its quants likewise.
struct Q8_0QuadChunk {
  const uint8_t* scales;
  const uint8_t* quants;
  int64_t scale_row, scale_block, quant_row, quant_block;
  const uint8_t* Scale(int r, int64_t j) const { return scales + r * scale_row + j * scale_block; }
  const uint8_t* Quants(int r, int64_t j) const { return quants + r * quant_row + j * quant_block; }
};

// The rows as stored, w_stride apart. 16 row streams at once need the next tile prefetched
// even for one token, else the hardware prefetcher falls behind.
class Q8_0Rows {
 public:
  static constexpr bool kPrefetchAlways = true;
  static constexpr bool kPacked = false;
  Q8_0Rows(const uint8_t* w, int64_t w_stride, int64_t nb) : w_(w), stride_(w_stride), nb_(nb) {}
  Q8_0QuadChunk Quad(int g, int64_t i0) const {
    const uint8_t* b = w_ + kQ8_0QuadRows * g * stride_ + i0 * kBlockBytes;
    return {b, b + 2, stride_, kBlockBytes, stride_, kBlockBytes};
  }
  // Prefetch into L2 of the next tile's lines, the share that goes with quad g's block i.
  void Prefetch(int g, int64_t i) const {
    const uint8_t* next = w_ + kWideRows * stride_ + (g * nb_ + i) * kQ8_0QuadRows * kBlockBytes;
    for (int64_t b = 0; b < kQ8_0QuadRows * kBlockBytes; b += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(next + b), _MM_HINT_T1);
    }
  }

 private:
  static constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  const uint8_t* w_;
  int64_t stride_, nb_;
};

// The group packed (Q8_0PackedLayout): a thread's share is one stream, which the hardware
// prefetcher follows; more tokens prefetch the next group as they go.
class Q8_0Packed {
 public:
  static constexpr bool kPrefetchAlways = false;
  static constexpr bool kPacked = true;
  Q8_0Packed(const uint8_t* w, int64_t group_stride, int64_t nb) : w_(w), group_stride_(group_stride), layout_{nb} {}
  Q8_0QuadChunk Quad(int g, int64_t i0) const {
    const int64_t c = i0 / kQ8_0ChunkBlocks;
    return {w_ + layout_.Quad(c, g), w_ + layout_.QuantsOfQuad(c, g), 2, 2 * kQ8_0QuadRows, 32, 32 * kQ8_0QuadRows};
  }
  // The next group's lines of quad g's block i (its scales with the chunk's first block).
  void Prefetch(const Q8_0QuadChunk& quad, int64_t j) const {
    const uint8_t* q = quad.Quants(0, j) + group_stride_;
    _mm_prefetch(reinterpret_cast<const char*>(q), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(q + 64), _MM_HINT_T1);
    if (j % 8 == 0) _mm_prefetch(reinterpret_cast<const char*>(quad.Scale(0, j) + group_stride_), _MM_HINT_T1);
  }

 private:
  const uint8_t* w_;
  int64_t group_stride_;
  Q8_0PackedLayout layout_;
};

// The 4 rows' d_w of a quad's block j: 4 consecutive halves when packed.
template <class Source>
COHORT_TILE_TARGET inline __m128 QuadScales(const Q8_0QuadChunk& quad, int64_t j) {
  if constexpr (Source::kPacked) {
    return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quad.Scale(0, j))));
  } else {
    uint64_t halves = 0;
    for (int r = 0; r < kQ8_0QuadRows; ++r) {
      uint16_t h;
      std::memcpy(&h, quad.Scale(r, j), 2);
      halves |= uint64_t{h} << (16 * r);
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(halves)));
  }
}

// Side data of a Q8_0 activation row for Q8_0 weights: per block its scale as a float, then
// (VNNI) the 8 int32 seeds -128 * (sum of bytes 4m..4m+3), m = 0..7, made once per row rather
// than once per (tile, block).
COHORT_TILE_TARGET void SideQ8_0(const uint8_t* act_row, int64_t n, float* side) {
  const auto* y = reinterpret_cast<const BlockQ8_0*>(act_row);
  const int64_t nb = n / kQK;
  for (int64_t i = 0; i < nb; ++i) {
    float* out = side + i * kQ8_0SideWords;
    out[0] = x86::HalfToFloat(y[i].d);
    if constexpr (kVnni) {
      for (int m = 0; m < 8; ++m) {
        const int32_t seed = -128 * (y[i].qs[4 * m] + y[i].qs[4 * m + 1] + y[i].qs[4 * m + 2] + y[i].qs[4 * m + 3]);
        std::memcpy(out + 1 + m, &seed, sizeof seed);
      }
    }
  }
}

template <class Source, int T>
COHORT_TILE_TARGET void WideQ8_0(const uint8_t* w, int64_t w_stride, const uint8_t* act,
                                 int64_t act_stride, const float* side, int64_t side_stride,
                                 int64_t n, float* out, int64_t out_stride) {
  constexpr int kQuads = kWideRows / kQ8_0QuadRows;
  constexpr int kQ8_0PassRows = Q8_0PassRows(T);
  constexpr int kPasses = kQ8_0QuadRows / kQ8_0PassRows;
  constexpr int64_t kBlockBytes = sizeof(BlockQ8_0);
  const int64_t nb = n / kQK;
  const Source rows(w, w_stride, nb);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc_of[kWideRows][T];
  for (int k = 0; k < kWideRows; ++k) {
    for (int t = 0; t < T; ++t) acc_of[k][t] = _mm256_setzero_ps();
  }
  alignas(64) float d[kQ8_0ChunkBlocks][T][kQ8_0QuadRows];  // d[j][t][r] = d_w(row r) * d_a(token t)
  for (int64_t i0 = 0; i0 < nb; i0 += kQ8_0ChunkBlocks) {
    const int64_t len = std::min<int64_t>(kQ8_0ChunkBlocks, nb - i0);
    const uint8_t* y0 = act + i0 * kBlockBytes + 2;  // token 0's quants of block i0
    for (int g = 0; g < kQuads; ++g) {
      const Q8_0QuadChunk quad = rows.Quad(g, i0);
      for (int64_t j = 0; j < len; ++j) {
        const __m128 dw = QuadScales<Source>(quad, j);
        for (int t = 0; t < T; ++t) {
          const float da = Q8_0SideScale(side + t * side_stride, i0 + j);
          _mm_store_ps(d[j][t], _mm_mul_ps(dw, _mm_set1_ps(da)));
        }
      }
      for (int pass = 0; pass < kPasses; ++pass) {
        const int r0 = kQ8_0PassRows * pass;  // the pass's first row in the quad
        __m256 acc[kQ8_0PassRows][T];
        for (int r = 0; r < kQ8_0PassRows; ++r) {
          for (int t = 0; t < T; ++t) acc[r][t] = acc_of[kQ8_0QuadRows * g + r0 + r][t];
        }
        for (int64_t j = 0; j < len; ++j) {
          if (pass == 0) {
            if constexpr (Source::kPrefetchAlways) {
              rows.Prefetch(g, i0 + j);
            } else if constexpr (x86::kPrefetchPacked(T)) {
              rows.Prefetch(quad, j);
            }
          }
          __m256i x[kQ8_0PassRows], ax[kQ8_0PassRows];
          for (int r = 0; r < kQ8_0PassRows; ++r) {
            x[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quad.Quants(r0 + r, j)));
            ax[r] = kVnni ? _mm256_xor_si256(x[r], flip) : _mm256_sign_epi8(x[r], x[r]);
          }
          for (int t = 0; t < T; ++t) {
            const __m256i y = x86::LoadToRegister(y0 + t * act_stride + j * kBlockBytes);
            for (int r = 0; r < kQ8_0PassRows; ++r) {
              __m256i sum;
              if constexpr (kVnni) {
                const float* seed = side + t * side_stride + kQ8_0SideWords * (i0 + j) + 1;
                sum = _mm256_dpbusd_avx_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(seed)), ax[r], y);
              } else {
                sum = _mm256_madd_epi16(_mm256_maddubs_epi16(ax[r], _mm256_sign_epi8(y, x[r])), _mm256_set1_epi16(1));
              }
              acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d[j][t][r0 + r]), _mm256_cvtepi32_ps(sum), acc[r][t]);
            }
          }
        }
        for (int r = 0; r < kQ8_0PassRows; ++r) {
          for (int t = 0; t < T; ++t) acc_of[kQ8_0QuadRows * g + r0 + r][t] = acc[r][t];
        }
      }
    }
  }
  for (int k = 0; k < kWideRows; ++k) {
    for (int t = 0; t < T; ++t) out[t * out_stride + k] = x86::HorizontalSum(acc_of[k][t]);
  }
}

template <class Source>
struct Q8_0Kernel {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ8_0<Source, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

// The table GetWideTile / GetWideTilePacked return from.
inline WideTile WideTileOf(DType weight, bool packed) {
  switch (weight) {
    case DType::kQ4_0:
      return {packed ? x86::WideRun<Q4_0Kernel<Q4_0Packed>::Shape, kQ4_0MaxTokens>
                     : x86::WideRun<Q4_0Kernel<Q4_0Rows>::Shape, kQ4_0MaxTokens>,
              SideQ4_0, 16, kQ4_0MaxTokens};
    case DType::kMXFP4:  // never packed (CanPackRows)
      if (packed) return {};
      return {x86::WideRun<Q4_0Kernel<Mxfp4Rows>::Shape, kQ4_0MaxTokens>, SideQ4_0, 16, kQ4_0MaxTokens};
    case DType::kQ8_0:
      return {packed ? x86::WideRun<Q8_0Kernel<Q8_0Packed>::Shape, kQ8_0MaxTokens>
                     : x86::WideRun<Q8_0Kernel<Q8_0Rows>::Shape, kQ8_0MaxTokens>,
              SideQ8_0, 8 * kQ8_0SideWords, kQ8_0MaxTokens};
    default: return {};
  }
}
