// The AVX2 wide tile kernels for Q4_K and Q6_K (tile_wide_avx2_k.cc), written once for both
// of its instantiations: tile_wide_avx2_k.cc includes this file twice, inside namespace
// `plain` with COHORT_K_TARGET = COHORT_TARGET_AVX2 and kVnni = false, and inside namespace
// `vnni` with target "avx2,fma,f16c,avxvnni" and kVnni = true (a target attribute cannot depend on a
// template parameter), each with its Dpbusd / Dpwssd (the VNNI instructions, or for the AVX2
// build of the VNNI kernels that tests run on CPUs without AVX-VNNI, exact AVX2 equivalents).
// No include guard, by design; no includes: the includer provides them.
//
// Q4_K: 16 rows as two halves of 8 rows, one row per 32-bit lane of a ymm register. Lane r
// does exactly the scalar steps of VecDotQ4_KRepacked (vec_dot_avx2_k.cc) for row r: the same
// exact integer sums, acc = fma(sum, d_w * d_a, acc), acc_min = fma(min_sum, dmin_w * d_a,
// acc_min) once per super-block (GEMV) or per 64 elements (kPerPair), value acc - acc_min.
// A sub-block's 32 products per row: without VNNI, 8 maddubs (each lane two sums of 2
// products, |.| <= 2 * 15 * 128 = 3840) add up in int16 (8 * 3840 = 30720: no overflow), and
// one madd by the (scale, scale) pair makes the scaled int32; with VNNI, dpbusd sums 4
// products per lane in int32, and mullo scales.
//
// Q6_K: VecDotQ6_K's 8 int32 / float lanes per row (its lane contents decide the float
// rounding), so a pass unpacks R rows' quants once for T tokens.

// The rows' word j of a 16-byte segment, as loaded by the Q4_K kernel: lane k = row 8h + k.
struct Q4KRowsX {
  COHORT_K_TARGET Q4KRowsX(const uint8_t* w, int64_t stride) : w_(w), s_(stride) {}
  // q[j] lane k = the 32-bit word at byte 16 * segment + 4j of row 8h + k's super-block i.
  COHORT_K_TARGET void Segment(int64_t i, int segment, int h, __m256i q[4]) const {
    const uint8_t* p = w_ + 8 * h * s_ + i * static_cast<int64_t>(sizeof(BlockQ4_K)) + 16 * segment;
    // z[b]: row b in the low 128 bits, row 4 + b in the high; a 4x4 transpose of words in
    // each 128-bit lane leaves word j of rows 0..3 (4..7) in the low (high) lane of q[j].
    __m256i z[4];
    for (int b = 0; b < 4; ++b) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + b * s_));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + (4 + b) * s_));
      z[b] = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    }
    const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]);
    const __m256i t1 = _mm256_unpackhi_epi32(z[0], z[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]);
    const __m256i t3 = _mm256_unpackhi_epi32(z[2], z[3]);
    q[0] = _mm256_unpacklo_epi64(t0, t2);
    q[1] = _mm256_unpackhi_epi64(t0, t2);
    q[2] = _mm256_unpacklo_epi64(t1, t3);
    q[3] = _mm256_unpackhi_epi64(t1, t3);
  }
  // Part `part` of `parts` of the prefetch into L2 of the next tile's (rows 16..31) block i:
  // 16 row streams at once defeat the hardware prefetcher.
  void Prefetch(int64_t i, int part, int parts) const {
    const uint8_t* next = w_ + 16 * s_ + i * static_cast<int64_t>(sizeof(BlockQ4_K));
    for (int r = 16 * part / parts; r < 16 * (part + 1) / parts; ++r) {
      for (int line = 0; line < 3; ++line) PrefetchL2(next + r * s_ + 64 * line);
    }
  }

 private:
  const uint8_t* w_;
  int64_t s_;
};

// The same words packed (PackSegments16): super-block i of the group is 9 segments of 256
// bytes, word j of the 16 rows at 64j, so half h's 8 rows are the 32 bytes at 64j + 32h.
template <int T>
struct Q4KPackedX {
  static constexpr int64_t kBlockBytes = 16 * static_cast<int64_t>(sizeof(BlockQ4_K));
  Q4KPackedX(const uint8_t* w, int64_t group_stride) : group_(w, group_stride) {}
  COHORT_K_TARGET void Segment(int64_t i, int segment, int h, __m256i q[4]) const {
    const uint8_t* b = group_.Block(i) + 256 * segment + 32 * h;
    for (int j = 0; j < 4; ++j) q[j] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * j));
  }
  // As the AVX-512 kernel (tile_wide_x86.h): the next group with more than 1 token; at 1
  // token the lines kLinesAheadBytes on (no page-ahead: tile_wide_avx2_kernels.h says why).
  void Prefetch(int64_t i, int part, int parts) const {
    if constexpr (x86::kPrefetchPacked(T)) group_.PrefetchNextPart(i, part, parts);
    if constexpr (T == 1) {
      x86::PrefetchLinesAhead(group_.Block(i), kBlockBytes, part, parts);
    }
  }

 private:
  x86::PackedGroup<kBlockBytes> group_;
};

// A super-block's per-row constants for 8 rows, lane k for row 8h + k.
struct Q4KHeadX {
  __m256 d, dmin;
  __m256i sc[8];    // scale j: (sc, sc) int16 pairs (for madd), or int32 with VNNI (mullo)
  __m256i mins[4];  // (min 2k, min 2k + 1) as int16 pairs
};

// Dword lanes of 4 bytes b0..b3 -> new dword lanes of byte `a` (or zero for 0x80) etc.
COHORT_K_TARGET inline __m256i DwordBytes(__m256i v, int8_t b0, int8_t b1, int8_t b2, int8_t b3) {
  const __m256i m = _mm256_set_epi8(b3 + 12, b2 + 12, b1 + 12, b0 + 12, b3 + 8, b2 + 8, b1 + 8, b0 + 8,
                                    b3 + 4, b2 + 4, b1 + 4, b0 + 4, b3, b2, b1, b0,
                                    b3 + 12, b2 + 12, b1 + 12, b0 + 12, b3 + 8, b2 + 8, b1 + 8, b0 + 8,
                                    b3 + 4, b2 + 4, b1 + 4, b0 + 4, b3, b2, b1, b0);
  return _mm256_shuffle_epi8(v, m);
}
// A byte offset that DwordBytes turns into a zero byte whatever it adds (bit 7 stays set).
constexpr int8_t kZeroByte = -128;

template <class Source>
COHORT_K_TARGET inline void LoadHeadX(const Source& rows, int64_t i, int h, Q4KHeadX* hd) {
  __m256i head[4];  // words 0..3 of each row's block: d | dmin << 16, then the 12 scale bytes
  rows.Segment(i, 0, h, head);
  // Per 128-bit lane: the 4 rows' d (bytes 0..7), then their dmin; then the lanes' d together.
  const __m256i halves = _mm256_permute4x64_epi64(
      _mm256_shuffle_epi8(head[0], _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                                    0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)),
      0xd8);
  hd->d = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
  hd->dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
  const __m256i low6 = _mm256_set1_epi8(0x3f), low4 = _mm256_set1_epi8(0x0f), low2 = _mm256_set1_epi8(0x03);
  const __m256i u0 = head[1], u1 = head[2], u2 = head[3];
  // As UnpackScalesK4 (tile_avx512_k.cc), 8 rows at once: bytes 0..3 of sc_lo are scales
  // 0..3, of sc_hi scales 4..7; the same for the mins.
  const __m256i sc_lo = _mm256_and_si256(u0, low6);
  const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, low4),
                                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), low2), 4));
  const __m256i mn_lo = _mm256_and_si256(u1, low6);
  const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), low4),
                                        _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), low2), 4));
  for (int k = 0; k < 4; ++k) {
    const auto b = static_cast<int8_t>(k);
    if constexpr (kVnni) {
      hd->sc[k] = DwordBytes(sc_lo, b, kZeroByte, kZeroByte, kZeroByte);
      hd->sc[4 + k] = DwordBytes(sc_hi, b, kZeroByte, kZeroByte, kZeroByte);
    } else {
      hd->sc[k] = DwordBytes(sc_lo, b, kZeroByte, b, kZeroByte);
      hd->sc[4 + k] = DwordBytes(sc_hi, b, kZeroByte, b, kZeroByte);
    }
  }
  hd->mins[0] = DwordBytes(mn_lo, 0, kZeroByte, 1, kZeroByte);
  hd->mins[1] = DwordBytes(mn_lo, 2, kZeroByte, 3, kZeroByte);
  hd->mins[2] = DwordBytes(mn_hi, 0, kZeroByte, 1, kZeroByte);
  hd->mins[3] = DwordBytes(mn_hi, 2, kZeroByte, 3, kZeroByte);
}

// Lane k += the products of row k's 4 nibbles (lane k of q, unsigned) with the activation's 4
// bytes at a (signed): dpbusd, or maddubs into int16 pairs.
COHORT_K_TARGET inline __m256i DotStep(__m256i sum, __m256i q, const int8_t* a) {
  const __m256i y = _mm256_set1_epi32(x86::LoadInt(a));
  if constexpr (kVnni) {
    return Dpbusd(sum, q, y);
  } else {
    return _mm256_add_epi16(sum, _mm256_maddubs_epi16(q, y));
  }
}

// A sub-block's sum (DotStep's) times its scale, as int32 lanes.
COHORT_K_TARGET inline __m256i Scaled(__m256i sub, __m256i scale) {
  if constexpr (kVnni) {
    return _mm256_mullo_epi32(sub, scale);
  } else {
    return _mm256_madd_epi16(sub, scale);
  }
}

// out[t * out_stride + r] for the 16 rows r and T tokens.
template <class Source, bool kPerPair, int T>
COHORT_K_TARGET void WideQ4K(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                             const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
  const int64_t nb = n / kQK_K;
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const Source rows(w, w_stride);
  __m256 acc[2][T], acc_min[2][T];
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < T; ++t) acc[h][t] = acc_min[h][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < nb; ++i) {
    const BlockQ8_K* y[T];
    const int32_t* pairs[T];
    for (int t = 0; t < T; ++t) {
      y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
      pairs[t] = reinterpret_cast<const int32_t*>(side + t * side_stride) + i * kQ8KSideWords;
    }
    for (int h = 0; h < 2; ++h) {
      Q4KHeadX hd;
      LoadHeadX(rows, i, h, &hd);
      __m256i sum[T];
      for (int t = 0; t < T; ++t) sum[t] = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {  // 64 elements: sub-blocks 2c (low nibbles), 2c + 1 (high)
        rows.Prefetch(i, 4 * h + c, 8);
        __m256i sub_lo[T], sub_hi[T];
        for (int t = 0; t < T; ++t) sub_lo[t] = sub_hi[t] = _mm256_setzero_si256();
        for (int part = 0; part < 2; ++part) {
          __m256i q[4];  // q[j] lane k: row 8h + k's qs bytes 32c + 16 part + 4j ..
          rows.Segment(i, 1 + 2 * c + part, h, q);
          for (int j = 0; j < 4; ++j) {
            const __m256i lo = _mm256_and_si256(q[j], low_mask);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q[j], 4), low_mask);
            const int e = 64 * c + 16 * part + 4 * j;
            for (int t = 0; t < T; ++t) {
              sub_lo[t] = DotStep(sub_lo[t], lo, y[t]->qs + e);
              sub_hi[t] = DotStep(sub_hi[t], hi, y[t]->qs + e + 32);
            }
          }
        }
        for (int t = 0; t < T; ++t) {
          const __m256i s = _mm256_add_epi32(Scaled(sub_lo[t], hd.sc[2 * c]), Scaled(sub_hi[t], hd.sc[2 * c + 1]));
          if constexpr (kPerPair) {
            const __m256 yd = _mm256_set1_ps(y[t]->d);
            const __m256i pm = _mm256_madd_epi16(hd.mins[c], _mm256_set1_epi32(pairs[t][c]));
            acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(hd.d, yd), acc[h][t]);
            acc_min[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pm), _mm256_mul_ps(hd.dmin, yd), acc_min[h][t]);
          } else {
            sum[t] = _mm256_add_epi32(sum[t], s);
          }
        }
      }
      if constexpr (!kPerPair) {
        for (int t = 0; t < T; ++t) {
          __m256i m = _mm256_madd_epi16(hd.mins[0], _mm256_set1_epi32(pairs[t][0]));
          for (int k = 1; k < kQ8KSideWords; ++k) {
            m = _mm256_add_epi32(m, _mm256_madd_epi16(hd.mins[k], _mm256_set1_epi32(pairs[t][k])));
          }
          const __m256 yd = _mm256_set1_ps(y[t]->d);
          acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[t]), _mm256_mul_ps(hd.d, yd), acc[h][t]);
          acc_min[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(hd.dmin, yd), acc_min[h][t]);
        }
      }
    }
  }
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < T; ++t) {
      _mm256_storeu_ps(out + t * out_stride + 8 * h, _mm256_sub_ps(acc[h][t], acc_min[h][t]));
    }
  }
}

template <template <int> class Source, bool kPerPair>
struct Q4KKernelX {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride,
                    const float* side, int64_t side_stride, int64_t n, float* out, int64_t out_stride) {
      WideQ4K<Source<T>, kPerPair, T>(w, w_stride, act, act_stride, side, side_stride, n, out, out_stride);
    }
  };
};

template <int T>
using Q4KRowsT = Q4KRowsX;

// Q6_K rows [r0, r0 + R) of the tile, all n elements, T tokens, in VecDotQ6_K's 8 lanes per
// row. kPacked: w is a group packed by PackRows (Q6KPackedLayout), w_stride the bytes from
// one group to the next.
template <int R, int T, bool kPacked>
COHORT_K_TARGET void WideQ6KPass(const uint8_t* w, int64_t w_stride, int r0, const uint8_t* act, int64_t act_stride,
                                 int64_t n, float* out, int64_t out_stride) {
  const Q6KPackedLayout layout{n / kQK_K};
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  const __m256i neg32 = _mm256_set1_epi16(-32);
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const int64_t off = i * static_cast<int64_t>(sizeof(BlockQ6_K));
    const BlockQ8_K* y[T];
    for (int t = 0; t < T; ++t) y[t] = reinterpret_cast<const BlockQ8_K*>(act + t * act_stride) + i;
    for (int r = 0; r < R; ++r) {
      const uint8_t* row = kPacked ? w + layout.Block(r0 + r, i) : w + (r0 + r) * w_stride + off;
      // Packed single-token passes read their stripe as one stream and prefetch nothing (see
      // tile_wide_avx2_kernels.h: no page-ahead prefetch on AVX2); otherwise the same bytes of
      // the caller's next tile go to L2.
      if (!(kPacked && T == 1)) {
        const uint8_t* next = kPacked ? row + w_stride : row + kWideRows * w_stride;
        for (int line = 0; line < 4; ++line) PrefetchL2(next + 64 * line);
      }
      const auto* x = reinterpret_cast<const BlockQ6_K*>(row);
      const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x->scales)));
      // -32 * scale fits int16, and madd by it is exactly minus VecDotQ6_K's bias (32 *
      // madd(bsums, scales)): the sums start from it.
      const __m256i neg32_scales = _mm256_mullo_epi16(scales16, neg32);
      __m256i sum[T];
      for (int t = 0; t < T; ++t) {
        sum[t] = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->bsums)), neg32_scales);
      }
      for (int h = 0; h < 2; ++h) {  // halves of 128 elements
        const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->ql + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->ql + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x->qh + 32 * h));
        // The half's 8 scales (int16) in both 128-bit lanes.
        const __m256i sc = _mm256_permute4x64_epi64(scales16, h == 0 ? 0x44 : 0xee);
        for (int g = 0; g < 4; ++g) {  // 32 elements each, scales 2g and 2g + 1 of the half
          const __m256i low = g == 0   ? _mm256_and_si256(ql0, low_mask)
                              : g == 1 ? _mm256_and_si256(ql1, low_mask)
                              : g == 2 ? _mm256_and_si256(_mm256_srli_epi16(ql0, 4), low_mask)
                                       : _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low_mask);
          const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), two_bits), 4);
          const __m256i u = _mm256_or_si256(low, high);
          // int16 lanes 0..7: scale 2g, 8..15: scale 2g + 1 (ScalePair).
          const auto a = static_cast<int8_t>(4 * g), b = static_cast<int8_t>(4 * g + 2);
          const __m256i pair = _mm256_shuffle_epi8(
              sc, _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                   b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1));
          for (int t = 0; t < T; ++t) {
            const __m256i prod = _mm256_maddubs_epi16(
                u, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t]->qs + 128 * h + 32 * g)));
            if constexpr (kVnni) {
              sum[t] = Dpwssd(sum[t], prod, pair);
            } else {
              sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(prod, pair));
            }
          }
        }
      }
      const float d = x86::HalfToFloat(x->d);
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(y[t]->d * d), _mm256_cvtepi32_ps(sum[t]), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) out[t * out_stride + r0 + r] = x86::HorizontalSum(acc[r][t]);
  }
}

template <bool kPacked>
struct Q6KKernelX {
  template <int T>
  struct Shape {
    static void Run(const uint8_t* w, int64_t w_stride, const uint8_t* act, int64_t act_stride, const float*,
                    int64_t, int64_t n, float* out, int64_t out_stride) {
      // R * T float accumulators and T int sums stay (mostly) in the 16 registers; a pass
      // never spans two packed stripes.
      constexpr int kRows = T == 1 ? 8 : T == 2 ? 4 : 2;
      static_assert(kQ6KStripeRows % kRows == 0);
      for (int r0 = 0; r0 < kWideRows; r0 += kRows) {
        WideQ6KPass<kRows, T, kPacked>(w, w_stride, r0, act, act_stride, n, out, out_stride);
      }
    }
  };
};

WideTile WideTileK(DType weight, bool grouped, bool packed) {
  if (weight == DType::kQ6_K) {
    return {packed ? x86::WideRun<Q6KKernelX<true>::Shape, kQ6KTokens> : x86::WideRun<Q6KKernelX<false>::Shape, kQ6KTokens>,
            nullptr, 0, kQ6KTokens};
  }
  if (weight != DType::kQ4_K) return {};
  WideTileFn fn;
  if (packed) {
    fn = grouped ? x86::WideRun<Q4KKernelX<Q4KPackedX, true>::Shape, kQ4KTokens>
                 : x86::WideRun<Q4KKernelX<Q4KPackedX, false>::Shape, kQ4KTokens>;
  } else {
    fn = grouped ? x86::WideRun<Q4KKernelX<Q4KRowsT, true>::Shape, kQ4KTokens>
                 : x86::WideRun<Q4KKernelX<Q4KRowsT, false>::Shape, kQ4KTokens>;
  }
  return {fn, SideQ8_K, kQ8KSideWords, kQ4KTokens};
}
