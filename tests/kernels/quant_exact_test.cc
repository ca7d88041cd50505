// Bit-exact checks: the activation quantizers (Q8_0, Q8_1, Q8_K) against hand-computed
// blocks, including round-half-even ties and Q8_K's sign rule, and the K-quant block layouts
// against a second, independently written decoder that walks the bytes the way ggml's
// dequantize_row_* loops do.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "core/fp16.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

uint16_t HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

TEST(Q8_0Exact, TiesRoundToEvenWithUnitScale) {
  // amax = 127 makes d = 1 and the multiplier 127/amax = 1, so x itself is rounded.
  float x[32] = {127.0f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 62.5f, 0.49f, -126.5f, 3.0f};
  uint8_t q[34];
  QuantizeRow(DType::kQ8_0, x, q, 32);
  EXPECT_EQ(HalfAt(q), 0x3c00);  // fp16 1.0
  const int8_t* qs = reinterpret_cast<const int8_t*>(q + 2);
  const int8_t expected[11] = {127, 0, 2, 2, 0, -2, -2, 62, 0, -126, 3};
  for (int i = 0; i < 11; ++i) EXPECT_EQ(qs[i], expected[i]) << "element " << i;
  for (int i = 11; i < 32; ++i) EXPECT_EQ(qs[i], 0);
}

TEST(Q8_0Exact, MultiplierUsesUnroundedAmax) {
  // amax = 1: d = 1/127 is stored as fp16 0x2008 (0.0078735...), but the values are scaled
  // by 127/amax = 127 exactly, so 0.5 -> 63.5 -> 64 (even), -0.5 -> -64, 0.25 -> 31.75 -> 32.
  float x[32] = {1.0f, 0.5f, -0.5f, 0.25f, -1.0f};
  uint8_t q[34];
  QuantizeRow(DType::kQ8_0, x, q, 32);
  EXPECT_EQ(HalfAt(q), 0x2008);
  const int8_t* qs = reinterpret_cast<const int8_t*>(q + 2);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], 64);
  EXPECT_EQ(qs[2], -64);
  EXPECT_EQ(qs[3], 32);
  EXPECT_EQ(qs[4], -127);
}

TEST(Q8_0Exact, HalfScaleTies) {
  // amax = 63.5: d = 0.5 (fp16 0x3800), multiplier 2: 0.25 -> 0.5 -> 0, 0.75 -> 1.5 -> 2,
  // 1.25 -> 2.5 -> 2, -1.25 -> -2, -63.5 -> -127.
  float x[32] = {-63.5f, 0.25f, 0.75f, 1.25f, -1.25f};
  uint8_t q[34];
  QuantizeRow(DType::kQ8_0, x, q, 32);
  EXPECT_EQ(HalfAt(q), 0x3800);
  const int8_t* qs = reinterpret_cast<const int8_t*>(q + 2);
  const int8_t expected[5] = {-127, 0, 2, 2, -2};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(qs[i], expected[i]) << "element " << i;
}

TEST(Q8_1Exact, StoresScaledSum) {
  // d = 1; q = {127, 2, -2, 62, 1...}: sum = 127 + 2 - 2 + 62 + 28*1 = 217 -> s = fp16(217).
  float x[32];
  for (float& v : x) v = 1.0f;
  x[0] = 127.0f;
  x[1] = 2.5f;   // tie -> 2
  x[2] = -1.5f;  // tie -> -2
  x[3] = 62.5f;  // tie -> 62
  uint8_t q[36];
  QuantizeRow(DType::kQ8_1, x, q, 32);
  EXPECT_EQ(HalfAt(q), 0x3c00);
  EXPECT_EQ(HalfAt(q + 2), Fp32ToFp16(217.0f));
  const int8_t* qs = reinterpret_cast<const int8_t*>(q + 4);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], 2);
  EXPECT_EQ(qs[2], -2);
  EXPECT_EQ(qs[3], 62);
  EXPECT_EQ(qs[4], 1);
}

struct Q8KView {
  float d;
  const int8_t* qs;
  int16_t bsums[16];
};
Q8KView ViewQ8K(const uint8_t* block) {
  Q8KView v;
  std::memcpy(&v.d, block, 4);
  v.qs = reinterpret_cast<const int8_t*>(block + 4);
  std::memcpy(v.bsums, block + 4 + 256, sizeof v.bsums);
  return v;
}

TEST(Q8_KExact, NegativeMaxGivesPositiveScaleAndTies) {
  // max = -2 (largest magnitude): iscale = -127/-2 = 63.5, d = 1/63.5.
  float x[256] = {-2.0f, 1.0f, 0.5f, -1.0f, 2.0f};
  uint8_t q[292];
  QuantizeRow(DType::kQ8_K, x, q, 256);
  const Q8KView v = ViewQ8K(q);
  EXPECT_EQ(v.d, 1.0f / 63.5f);
  EXPECT_EQ(v.qs[0], -127);  // the max element always maps to -127
  EXPECT_EQ(v.qs[1], 64);    // 63.5 -> 64 (even)
  EXPECT_EQ(v.qs[2], 32);    // 31.75
  EXPECT_EQ(v.qs[3], -64);   // -63.5 -> -64 (even)
  EXPECT_EQ(v.qs[4], 127);   // +2 ties |max| but the first one decides the sign
  EXPECT_EQ(v.bsums[0], -127 + 64 + 32 - 64 + 127);
  for (int g = 1; g < 16; ++g) EXPECT_EQ(v.bsums[g], 0);
}

TEST(Q8_KExact, PositiveMaxGivesNegativeScale) {
  float x[256] = {};
  x[17] = 4.0f;   // max: iscale = -31.75, d = 1/-31.75
  x[18] = -2.0f;  // 63.5 -> 64
  x[19] = 1.0f;   // -31.75 -> -32
  x[255] = -4.0f; // 127: opposite sign of max, clamped by min(127, .) only above 127
  uint8_t q[292];
  QuantizeRow(DType::kQ8_K, x, q, 256);
  const Q8KView v = ViewQ8K(q);
  EXPECT_EQ(v.d, 1.0f / (-127.0f / 4.0f));
  EXPECT_LT(v.d, 0.0f);
  EXPECT_EQ(v.qs[17], -127);
  EXPECT_EQ(v.qs[18], 64);
  EXPECT_EQ(v.qs[19], -32);
  EXPECT_EQ(v.qs[255], 127);
  EXPECT_EQ(v.bsums[1], -127 + 64 - 32);
  EXPECT_EQ(v.bsums[15], 127);
  // Dequantizing gives back the inputs to within one step.
  const std::vector<float> back = testing::Dequantized(DType::kQ8_K, q, 256);
  EXPECT_FLOAT_EQ(back[17], 4.0f);
  EXPECT_NEAR(back[18], -2.0f, 4.0f / 127);
}

// ---- K-quant layouts: a decoder written in ggml's sequential style ----

std::vector<uint8_t> RandomBlocks(DType type, int n_blocks, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> bytes(static_cast<size_t>(Traits(type).type_size * n_blocks));
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  return bytes;
}

// Overwrites the fp16 field at `offset` of each block with a modest random scale.
void SetHalf(std::vector<uint8_t>* bytes, DType type, int offset, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.05f, 0.05f);
  const int64_t size = Traits(type).type_size;
  for (size_t b = 0; b * size < bytes->size(); ++b) {
    const uint16_t h = Fp32ToFp16(dist(rng));
    std::memcpy(bytes->data() + b * size + offset, &h, 2);
  }
}

void ScaleMinK4(int j, const uint8_t* q, int* d, int* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

std::vector<float> WalkQ2K(const uint8_t* b, int nb) {
  std::vector<float> y;
  for (int i = 0; i < nb; ++i, b += 84) {
    const float d = Fp16ToFp32(HalfAt(b + 80)), dmin = Fp16ToFp32(HalfAt(b + 82));
    const uint8_t* q = b + 16;
    int is = 0;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[is++];
          const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; ++l) y.push_back(dl * ((q[l + 16 * half] >> shift) & 3) - ml);
        }
      }
    }
  }
  return y;
}

std::vector<float> WalkQ3K(const uint8_t* b, int nb) {
  std::vector<float> y;
  for (int i = 0; i < nb; ++i, b += 110) {
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const uint8_t* s = b + 96;
    const float d = Fp16ToFp32(HalfAt(b + 108));
    int scales[16];
    for (int j = 0; j < 16; ++j) {
      const int low = j < 8 ? (s[j] & 0xF) : (s[j - 8] >> 4);
      scales[j] = (low | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
    }
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < 256; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d * scales[is++];
          for (int l = 16 * half; l < 16 * half + 16; ++l) {
            y.push_back(dl * (((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4)));
          }
        }
      }
    }
  }
  return y;
}

std::vector<float> WalkQ45K(const uint8_t* b, int nb, bool five) {
  std::vector<float> y;
  const int size = five ? 176 : 144;
  for (int i = 0; i < nb; ++i, b += size) {
    const float d = Fp16ToFp32(HalfAt(b)), dmin = Fp16ToFp32(HalfAt(b + 2));
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* q = b + (five ? 48 : 16);
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, q += 32, is += 2, u1 <<= 2, u2 <<= 2) {
      int sc, m;
      ScaleMinK4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      ScaleMinK4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y.push_back(d1 * ((q[l] & 0xF) + (five && (qh[l] & u1) ? 16 : 0)) - m1);
      for (int l = 0; l < 32; ++l) y.push_back(d2 * ((q[l] >> 4) + (five && (qh[l] & u2) ? 16 : 0)) - m2);
    }
  }
  return y;
}

std::vector<float> WalkQ6K(const uint8_t* b, int nb) {
  std::vector<float> y;
  for (int i = 0; i < nb; ++i, b += 210) {
    const float d = Fp16ToFp32(HalfAt(b + 208));
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int n = 0; n < 256; n += 128, ql += 64, qh += 32, sc += 8) {
      float out[128];
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        out[l] = d * sc[is] * (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        out[l + 32] = d * sc[is + 2] * (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        out[l + 64] = d * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        out[l + 96] = d * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      y.insert(y.end(), out, out + 128);
    }
  }
  return y;
}

void ExpectSameValues(DType type, const std::vector<uint8_t>& bytes,
                      const std::vector<float>& expected) {
  const std::vector<float> got = testing::Dequantized(type, bytes.data(), 256 * 3);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "element " << i;
}

TEST(KQuantLayout, Q2_KMatchesSequentialDecoder) {
  auto bytes = RandomBlocks(DType::kQ2_K, 3, 1);
  SetHalf(&bytes, DType::kQ2_K, 80, 2);
  SetHalf(&bytes, DType::kQ2_K, 82, 3);
  ExpectSameValues(DType::kQ2_K, bytes, WalkQ2K(bytes.data(), 3));
}

TEST(KQuantLayout, Q3_KMatchesSequentialDecoder) {
  auto bytes = RandomBlocks(DType::kQ3_K, 3, 4);
  SetHalf(&bytes, DType::kQ3_K, 108, 5);
  ExpectSameValues(DType::kQ3_K, bytes, WalkQ3K(bytes.data(), 3));
}

TEST(KQuantLayout, Q4_KMatchesSequentialDecoder) {
  auto bytes = RandomBlocks(DType::kQ4_K, 3, 6);
  SetHalf(&bytes, DType::kQ4_K, 0, 7);
  SetHalf(&bytes, DType::kQ4_K, 2, 8);
  ExpectSameValues(DType::kQ4_K, bytes, WalkQ45K(bytes.data(), 3, false));
}

TEST(KQuantLayout, Q5_KMatchesSequentialDecoder) {
  auto bytes = RandomBlocks(DType::kQ5_K, 3, 9);
  SetHalf(&bytes, DType::kQ5_K, 0, 10);
  SetHalf(&bytes, DType::kQ5_K, 2, 11);
  ExpectSameValues(DType::kQ5_K, bytes, WalkQ45K(bytes.data(), 3, true));
}

TEST(KQuantLayout, Q6_KMatchesSequentialDecoder) {
  auto bytes = RandomBlocks(DType::kQ6_K, 3, 12);
  SetHalf(&bytes, DType::kQ6_K, 208, 13);
  ExpectSameValues(DType::kQ6_K, bytes, WalkQ6K(bytes.data(), 3));
}

// Re-quantizing random K blocks must reproduce them once decoded (pack inverts unpack).
TEST(KQuantLayout, QuantizeOfDequantizedBlockIsClose) {
  for (DType type : {DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(type));
    const std::vector<float> x = testing::RandomRow(256, 99);
    std::vector<uint8_t> q(RowBytes(type, 256)), q2(RowBytes(type, 256));
    QuantizeRow(type, x.data(), q.data(), 256);
    const std::vector<float> once = testing::Dequantized(type, q.data(), 256);
    QuantizeRow(type, once.data(), q2.data(), 256);
    const std::vector<float> twice = testing::Dequantized(type, q2.data(), 256);
    double err = 0, ref = 0;
    for (int i = 0; i < 256; ++i) {
      err += (twice[i] - once[i]) * (twice[i] - once[i]);
      ref += once[i] * once[i];
    }
    EXPECT_LE(std::sqrt(err / ref), 0.1);
  }
}

}  // namespace
}  // namespace cohort::kernels
