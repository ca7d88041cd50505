// IQ4_NL and IQ4_XS: hand-decoded blocks, ggml's quantizer reproducing llama-quantize's bytes
// on the fixtures' tensors (with and without llama-imatrix's importance matrix), x86's 8-bit sign move (a Q8_K -128 against a negative weight) in the
// single-token IQ4_XS order, and every SIMD level equal to the scalar reference bit for bit in
// both orders (single tokens and grouped batches), on x86 and ARM alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/fp16.h"
#include "gguf/gguf.h"
#include "gguf/imatrix.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"
#include "test_util.h"

namespace cohort::kernels {
namespace {

TEST(IQuant, Iq4NlBlockDecodesToScaleTimesTable) {
  BlockIq4Nl b{};
  b.d = Fp32ToFp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float out[32];
  DequantizeRow(DType::kIQ4_NL, &b, out, 32);
  EXPECT_EQ(out[0], -63.5f);   // index 0: -127
  EXPECT_EQ(out[8], 0.5f);     // index 8: 1
  EXPECT_EQ(out[15], 56.5f);   // index 15: 113
  EXPECT_EQ(out[16], 56.5f);   // high nibble of byte 0: 15
  EXPECT_EQ(out[31], -63.5f);  // high nibble of byte 15: 0
}

TEST(IQuant, Iq4XsScalesAreSixBitsBiasedBy32) {
  BlockIq4Xs b{};
  b.d = Fp32ToFp16(1.0f);
  // Sub-block 0: low 0x1, high 0b10 -> 33 - 32 = 1; sub-block 1: low 0xf, high 0b00 -> -17.
  b.scales_l[0] = 0xf1;
  b.scales_h = 0b0010;
  std::memset(b.qs, 0x88, sizeof b.qs);  // index 8 (value 1) everywhere
  std::vector<float> out(256);
  DequantizeRow(DType::kIQ4_XS, &b, out.data(), 256);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[31], 1.0f);
  EXPECT_EQ(out[32], -17.0f);
  EXPECT_EQ(out[64], -32.0f);  // sub-blocks 2..7: code 0 -> -32
}

// llama-quantize ran ggml's quantize_iq4_nl / quantize_iq4_xs (no importance matrix) on these
// very F32 tensors: QuantizeRow must write the same bytes.
TEST(IQuant, QuantizerReproducesLlamaQuantizeBytes) {
  const std::string dir = std::string(COHORT_TEST_DATA) + "/fixtures/models/";
  auto f32 = gguf::File::Open(dir + "tiny-llama-f32.gguf");
  ASSERT_TRUE(f32.ok());
  for (const char* type_name : {"iq4_nl", "iq4_xs"}) {
    auto q = gguf::File::Open(dir + "tiny-llama-" + type_name + ".gguf");
    ASSERT_TRUE(q.ok()) << type_name;
    for (const char* tensor : {"blk.0.attn_k.weight", "blk.1.ffn_down.weight", "output.weight"}) {
      SCOPED_TRACE(std::string(type_name) + " " + tensor);
      const gguf::TensorInfo* src = (*f32)->FindTensor(tensor);
      const gguf::TensorInfo* want = (*q)->FindTensor(tensor);
      ASSERT_NE(src, nullptr);
      ASSERT_NE(want, nullptr);
      ASSERT_EQ(DTypeName(want->type), type_name);
      const auto values = (*f32)->TensorData(*src);
      const auto want_bytes = (*q)->TensorData(*want);
      std::vector<uint8_t> got(want_bytes.size());
      QuantizeRow(want->type, reinterpret_cast<const float*>(values.data()), got.data(), src->n_elements());
      EXPECT_EQ(0, std::memcmp(got.data(), want_bytes.data(), got.size()));
    }
  }
}

// llama-quantize --imatrix ran ggml's quantizer on the same F32 tensors weighing each column
// by llama-imatrix's matrix of tiny-llama-f32 (tools/make-quant-fixtures.sh *_imat): the rows
// quantized with that matrix's columns give the same bytes, which differ from the unweighted
// quantizer's. output.weight has no entry (llama-imatrix measures no output matrix): llama-quantize
// quantized it unweighted.
TEST(IQuant, WeightedQuantizerReproducesLlamaQuantizeImatrixBytes) {
  const std::string dir = std::string(COHORT_TEST_DATA) + "/fixtures/models/";
  auto f32 = gguf::File::Open(dir + "tiny-llama-f32.gguf");
  ASSERT_TRUE(f32.ok());
  auto imatrix = gguf::ImportanceMatrix::Load(dir + "tiny-llama-f32.imatrix.gguf");
  ASSERT_TRUE(imatrix.ok()) << imatrix.status().ToString();
  EXPECT_EQ(imatrix->Find("output.weight"), nullptr);
  for (const char* type_name : {"iq4_nl", "iq4_xs"}) {
    auto q = gguf::File::Open(dir + "tiny-llama-" + type_name + "_imat.gguf");
    ASSERT_TRUE(q.ok()) << type_name;
    int weighted_tensors = 0;
    for (const gguf::TensorInfo& want : (*q)->tensors()) {
      if (want.ne.size() != 2 || DTypeName(want.type) != std::string(type_name)) continue;
      SCOPED_TRACE(std::string(type_name) + " " + want.name);
      const gguf::TensorInfo* src = (*f32)->FindTensor(want.name);
      ASSERT_NE(src, nullptr);
      const auto* values = reinterpret_cast<const float*>((*f32)->TensorData(*src).data());
      const auto want_bytes = (*q)->TensorData(want);
      const int64_t n = want.ne[0];
      const int64_t row_bytes = RowBytes(want.type, n);
      const std::vector<float>* importance = imatrix->Find(want.name);
      std::vector<uint8_t> got(want_bytes.size()), plain(want_bytes.size());
      for (int64_t r = 0; r < want.n_rows(); ++r) {
        if (importance != nullptr) {
          ASSERT_EQ(static_cast<int64_t>(importance->size()), n);
          QuantizeRowWeighted(want.type, values + r * n, got.data() + r * row_bytes, n, importance->data());
        } else {
          QuantizeRow(want.type, values + r * n, got.data() + r * row_bytes, n);
        }
        QuantizeRow(want.type, values + r * n, plain.data() + r * row_bytes, n);
      }
      EXPECT_EQ(0, std::memcmp(got.data(), want_bytes.data(), got.size()));
      if (importance != nullptr) {
        EXPECT_NE(0, std::memcmp(plain.data(), want_bytes.data(), got.size())) << "the matrix changed nothing";
        ++weighted_tensors;
      }
    }
    EXPECT_GE(weighted_tensors, 7 * 2);  // 7 matrices per layer, 2 layers
  }
}

// A file that is not an importance matrix is refused with a clear error.
TEST(IQuant, ImportanceMatrixRefusesOtherFiles) {
  const std::string dir = std::string(COHORT_TEST_DATA) + "/fixtures/models/";
  auto model = gguf::ImportanceMatrix::Load(dir + "tiny-llama-f32.gguf");
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("no importance data"), std::string::npos) << model.status().ToString();
  auto missing = gguf::ImportanceMatrix::Load(dir + "no-such.imatrix.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not an importance matrix GGUF"), std::string::npos);
}

// One IQ4_XS super-block of weight value -127 (index 0) with scale 1 against a Q8_K row whose
// first value is -128 and the rest 0: the true product is 16256, x86's single-token kernel
// computes |w| * (int8)(-(-128)) = -16256, and the batch (panel) order the true one.
TEST(IQuant, Iq4XsSingleTokenOrderKeepsX86SignWrap) {
  BlockIq4Xs w{};
  w.d = Fp32ToFp16(1.0f);
  std::memset(w.scales_l, 0x11, sizeof w.scales_l);  // code 33: scale 1, with the high bits below
  w.scales_h = 0xaaaa;                                 // high bits 0b10 for all 8
  std::memset(w.qs, 0, sizeof w.qs);
  BlockQ8_K a{};
  a.d = 1.0f;
  a.qs[0] = -128;
  for (SimdLevel level : SupportedSimdLevels()) {
    SCOPED_TRACE(SimdLevelName(level));
    EXPECT_EQ(GetVecDot(DType::kIQ4_XS, level)(&w, &a, 256), -16256.0f);
    EXPECT_EQ(GetVecDotGrouped(DType::kIQ4_XS, level)(&w, &a, 256), 16256.0f);
  }
  EXPECT_EQ(ref::GetIqVecDot(DType::kIQ4_XS)(&w, &a, 256), 16256.0f);  // ggml's generic order
}

TEST(IQuant, EverySimdLevelEqualsScalarBitForBit) {
  int checked = 0;
  for (DType type : {DType::kIQ4_NL, DType::kIQ4_XS}) {
    const DType act_type = VecDotType(type);
    for (int64_t n_blocks : {1, 2, 3, 5, 8}) {
      const int64_t n = n_blocks * 256;
      const std::vector<float> wf = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 7 + 1));
      const std::vector<float> af = testing::RandomRow(n, static_cast<uint32_t>(n_blocks * 7 + 2), 2.0f);
      for (int offset = 0; offset < 3; ++offset) {
        testing::MisalignedRow wq(type, n, offset), aq(act_type, n, 2 - offset);
        QuantizeRow(type, wf.data(), wq.data(), n);
        QuantizeRow(act_type, af.data(), aq.data(), n);
        const float want = GetVecDot(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
        const float want_grouped = GetVecDotGrouped(type, SimdLevel::kScalar)(wq.data(), aq.data(), n);
        // The x86 orders are reorderings of ggml's generic sum (up to x86's sign wrap, which
        // random rows meet rarely): close to it, and never exact garbage.
        const float generic = ref::GetIqVecDot(type)(wq.data(), aq.data(), n);
        EXPECT_NEAR(want_grouped, generic, 1e-3f * (std::fabs(generic) + 1.0f));
        for (SimdLevel level : SupportedSimdLevels()) {
          if (level == SimdLevel::kScalar) continue;
          SCOPED_TRACE(::testing::Message() << SimdLevelName(level) << " " << DTypeName(type) << " n=" << n);
          ASSERT_EQ(GetVecDot(type, level)(wq.data(), aq.data(), n), want);
          ASSERT_EQ(GetVecDotGrouped(type, level)(wq.data(), aq.data(), n), want_grouped);
          ++checked;
        }
      }
    }
  }
  if (BestSimdLevel() != SimdLevel::kScalar) {
    EXPECT_GT(checked, 0);
  }
}

}  // namespace
}  // namespace cohort::kernels
