// The AVX2 panel kernel's body (iq_panel_avx2.cc), included once per level inside a namespace
// that defines kVnni and COHORT_PANEL_TARGET (the target attribute): the plain AVX2 build must
// not be compiled with AVX-VNNI enabled, or the compiler may fuse madd + add into vpdpwssd.
// Internal to src/kernels.

template <int T>
COHORT_PANEL_TARGET void PanelHalf(const uint8_t* panel, const BlockQ8_K* const* y, int64_t n, int half, float* out,
                                   int64_t out_stride) {
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* block = panel + i * kIqPanelBlockBytes;
    const uint8_t* quants = block + kIqPanelQuantsOffset + 32 * half;
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int sb = 0; sb < 16; ++sb) {
      const __m256i scale = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + kIqPanelScalesOffset + 16 * sb + 8 * half)));
      // Without VNNI the scale goes into the widening madd: each lane's two int16 halves hold
      // the row's scale, so madd gives scale x (the 4 products' sum), exactly, and no mullo.
      const __m256i scale_pairs = _mm256_or_si256(_mm256_and_si256(scale, _mm256_set1_epi32(0xffff)),
                                                  _mm256_slli_epi32(scale, 16));
      __m256i dot[T];
      for (int t = 0; t < T; ++t) {
        dot[t] = kVnni ? _mm256_set1_epi32(-128 * y[t][i].bsums[sb]) : _mm256_setzero_si256();
      }
      for (int k = 0; k < 4; ++k) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(quants + (4 * sb + k) * 64));
        const __m256i v = _mm256_xor_si256(w, bias);  // the signed values
        const __m256i magnitude = _mm256_abs_epi8(v);
        for (int t = 0; t < T; ++t) {
          int32_t word;
          std::memcpy(&word, y[t][i].qs + 16 * sb + 4 * k, sizeof word);
          const __m256i a = _mm256_set1_epi32(word);
          if constexpr (kVnni) {
            dot[t] = _mm256_dpbusd_avx_epi32(dot[t], w, a);
          } else {
            const __m256i pairs = _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(a, v));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, scale_pairs));
          }
        }
      }
      if constexpr (kVnni) {
        for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot[t], scale));
      }
    }
    const __m256 dfac = _mm256_load_ps(reinterpret_cast<const float*>(block + kIqPanelDfacOffset) + 8 * half);
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dfac, _mm256_set1_ps(y[t][i].d)), acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(out + t * out_stride + 8 * half, acc[t]);
}

template <int T>
void PanelDot(const uint8_t* panel, const BlockQ8_K* const* y, int64_t n, float* out, int64_t out_stride) {
  for (int half = 0; half < 2; ++half) PanelHalf<T>(panel, y, n, half, out, out_stride);
}

