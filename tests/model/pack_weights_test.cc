// Model::PackWeights: every weight matrix moves into memory of the model's own (packed for the
// kernels that read it so, copied as it is otherwise), and the logits stay bit for bit those
// of the mapped model; OwnedSlices::Own, the plain copy, and a rank's shares of a matrix
// (rows, columns, a column share of every expert) on a real read-only file mapping.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "golden_util.h"
#include "gguf/writer.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"
#include "kernels/quant.h"
#include "model/block_env.h"
#include "model/owned_slices.h"

namespace cohort::model::testing {
namespace {

// Every position's logits over the golden's prompt (one batch: the wide tiles) and then its
// greedy ids (one token per step: the matvec kernels), on 2 threads.
std::vector<float> GoldenTokenLogits(Model& model, const Golden& golden) {
  std::vector<int32_t> tokens = golden.prompt_ids;
  tokens.insert(tokens.end(), golden.greedy_ids.begin(), golden.greedy_ids.end());
  ThreadPool pool(2);
  Context ctx;
  ctx.pool = &pool;
  KvCacheOptions o;
  o.n_ctx = 128;
  auto cache = model.NewKvCache(o);
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  if (!cache.ok()) return {};
  return RunChunks(model, ctx, **cache, tokens, golden.prompt_ids.size(), 1);
}

class PackWeightsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(PackWeightsTest, PackedModelGivesTheMappedModelsLogitsBitForBit) {
  const Golden golden = LoadGolden(GetParam());
  Loaded mapped = LoadModel(GetParam());
  Loaded packed = LoadModel(GetParam());
  ASSERT_NE(mapped.model, nullptr);
  ASSERT_NE(packed.model, nullptr);
  auto bytes = packed.model->PackWeights();
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  // Every matmul weight is copied, whatever its type: a model of several MB has MBs of them.
  EXPECT_GT(*bytes, static_cast<int64_t>(packed.file->file_size()) / 4);

  const std::vector<float> want = GoldenTokenLogits(*mapped.model, golden);
  const std::vector<float> got = GoldenTokenLogits(*packed.model, golden);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PackWeightsTest,
                         ::testing::Values("tiny-llama-f32", "tiny-qwen3moe-f32", "tiny-deepseek2-f32",
                                           "stories260K", "tiny-llama-q8_0", "tiny-llama-q4_0",
                                           "tiny-llama-q6_k", "tiny-llama-q4_k_m", "tiny-qwen3-q4_k_m",
                                           "tiny-llama-iq4_xs"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

// A tied LM head (a file without output.weight: the embedding is the head) is packed like any
// other matrix, and its packed copy then serves the embedding rows too (Decoder::EmbedRows
// unpacks a token's row): each fixture, rewritten without its output tensor, gives the same
// logits packed as mapped. The file is a real one, mapped read-only, as PackWeights requires.
TEST(PackWeightsTied, PackedTiedHeadServesTheEmbeddingRows) {
  for (const char* name : {"tiny-llama-q8_0", "tiny-llama-q6_k", "tiny-llama-q4_0", "tiny-llama-q4_k_m"}) {
    SCOPED_TRACE(name);
    auto source = gguf::File::Open(FixturePath(std::string("models/") + name + ".gguf"));
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    gguf::Writer writer;
    for (const gguf::KeyValue& kv : (*source)->metadata()) {
      if (kv.key != "general.alignment") writer.Set(kv.key, kv.value);
    }
    for (const gguf::TensorInfo& t : (*source)->tensors()) {
      if (t.name == "output.weight") continue;
      const std::span<const uint8_t> bytes = (*source)->TensorData(t);
      writer.AddTensor(t.name, t.type, t.ne, std::vector<uint8_t>(bytes.begin(), bytes.end()));
    }
    char path[] = "/tmp/cohort-tied-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ::close(fd);
    ASSERT_TRUE(writer.WriteFile(path).ok());
    auto mapped_file = gguf::File::Open(path);
    auto packed_file = gguf::File::Open(path);
    ASSERT_TRUE(mapped_file.ok() && packed_file.ok());
    auto mapped = Model::Load(**mapped_file);
    auto packed = Model::Load(**packed_file);
    ASSERT_TRUE(mapped.ok() && packed.ok());
    auto bytes = (*packed)->PackWeights();
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_GT(*bytes, static_cast<int64_t>((*packed_file)->file_size()) / 4);

    const Golden golden = LoadGolden(name);
    const std::vector<float> want = GoldenTokenLogits(**mapped, golden);
    const std::vector<float> got = GoldenTokenLogits(**packed, golden);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
    ::unlink(path);
  }
}

TEST(OwnedSlices, OwnCopiesARowsMappingIntoOneHugePageAlignedRegion) {
  // A file of three "tensors" of F32 rows, mapped read-only as a GGUF is.
  char path[] = "/tmp/cohort-own-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  constexpr int64_t kCols = 64, kRows = 300;
  std::vector<float> rows(3 * kCols * kRows);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i) * 0.5f - 7.0f;
  const size_t file_bytes = rows.size() * sizeof(float);
  ASSERT_EQ(::write(fd, rows.data(), file_bytes), static_cast<ssize_t>(file_bytes));
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  ::unlink(path);
  ASSERT_NE(map, MAP_FAILED);

  OwnedSlices owned;
  const int64_t tensor_bytes = kCols * kRows * sizeof(float);
  ASSERT_TRUE(owned.ReserveArena(3 * tensor_bytes + 3 * 64).ok());
  std::vector<TensorView> views;
  for (int t = 0; t < 3; ++t) {
    TensorView w;
    w.type = DType::kF32;
    w.ne[0] = kCols;
    w.ne[1] = kRows;
    w.row_bytes = kCols * sizeof(float);
    w.data = static_cast<const uint8_t*>(map) + t * tensor_bytes;
    views.push_back(w);
  }
  for (TensorView& w : views) ASSERT_TRUE(owned.Own(w).ok());
  owned.ReleaseCopiedSources();  // the mapping's pages go; the copies must not depend on them

  EXPECT_EQ(reinterpret_cast<uintptr_t>(views[0].data) % (2 << 20), 0u) << "the region starts on a huge page";
  for (int t = 0; t < 3; ++t) {
    const uint8_t* source = static_cast<const uint8_t*>(map) + t * tensor_bytes;
    EXPECT_NE(views[t].data, source);
    EXPECT_EQ(views[t].packed, nullptr);
    EXPECT_EQ(std::memcmp(views[t].data, rows.data() + t * kCols * kRows, tensor_bytes), 0) << t;
    if (t > 0) {
      EXPECT_EQ(views[t].data, views[t - 1].data + tensor_bytes) << "one region, in order";
    }
  }
  EXPECT_EQ(owned.bytes(), 3 * tensor_bytes);
  ::munmap(map, file_bytes);
}

// A rank's share of a matrix (OwnedSlices::ShareRows, ShareColumns), from a real read-only
// file mapping: packed where the kernels read the type packed, and MatMul over the share (rows
// through TensorView::Rows, columns through ColumnSlice, as the decoder takes them) gives the
// floats it gives over the mapped rows, at 1 token and at 3; the product reads the packed copy
// (the plain rows it would otherwise read are replaced by garbage).
TEST(OwnedSlices, SharedRowsAndColumnsArePackedAndGiveTheMappedProducts) {
  constexpr int64_t kCols = 1024, kRows = 64;
  constexpr int64_t kRow0 = 16, kRow1 = 48, kCol0 = 256, kCol1 = 768;
  int packed_types = 0;
  for (DType type : {DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t row_bytes = RowBytes(type, kCols);
    if (!kernels::CanPackRows(type, kRows, row_bytes)) continue;  // no packed kernel on this CPU
    ++packed_types;
    std::vector<uint8_t> bytes(static_cast<size_t>(kRows * row_bytes));
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) row[c] = std::sin(0.37f * static_cast<float>(r * kCols + c)) * 2.0f;
      kernels::QuantizeRow(type, row.data(), bytes.data() + r * row_bytes, kCols);
    }
    char path[] = "/tmp/cohort-share-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    void* map = ::mmap(nullptr, bytes.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    ::unlink(path);
    ASSERT_NE(map, MAP_FAILED);
    const TensorView mapped = TensorView::Make(type, bytes.data(), {kCols, kRows, 1, 1});
    TensorView shared = mapped;
    shared.data = static_cast<const uint8_t*>(map);
    TensorView by_rows = shared, by_cols = shared;
    OwnedSlices owned;
    ASSERT_TRUE(owned.ShareRows(&by_rows, kRow0, kRow1).ok());
    ASSERT_TRUE(owned.ShareColumns(&by_cols, kCol0, kCol1).ok());
    ASSERT_NE(by_rows.packed, nullptr);
    ASSERT_NE(by_cols.packed, nullptr);
    EXPECT_EQ(by_cols.packed_row_bytes, RowBytes(type, kCol1 - kCol0));

    const std::vector<uint8_t> garbage(bytes.size(), 0x5a);
    struct Case {
      TensorView want, got;
    };
    TensorView rows_got = by_rows.Rows(kRow0, kRow1);
    rows_got.data = garbage.data();
    TensorView cols_got = ColumnSlice(by_cols, kCol0, kCol1);
    cols_got.data = garbage.data();
    for (const Case& c : {Case{mapped.Rows(kRow0, kRow1), rows_got}, Case{ColumnSlice(mapped, kCol0, kCol1), cols_got}}) {
      ASSERT_NE(c.got.packed, nullptr);
      for (int64_t n_tokens : {1, 3}) {
        std::vector<float> x(static_cast<size_t>(c.want.ne[0] * n_tokens));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.11f * static_cast<float>(i));
        std::vector<float> want(static_cast<size_t>(c.want.n_rows() * n_tokens)), got(want.size(), -1.0f);
        std::vector<uint8_t> scratch;
        ThreadPool pool(2);
        kernels::MatMul(c.want, x.data(), n_tokens, want.data(), &pool, &scratch);
        kernels::MatMul(c.got, x.data(), n_tokens, got.data(), &pool, &scratch);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << "cols " << c.want.ne[0] << " tokens " << n_tokens;
      }
    }
    ::munmap(map, bytes.size());
  }
  if (packed_types == 0) GTEST_SKIP() << "no packed kernel on this CPU";
}

// A column share of every expert (OwnedSlices::ShareStridedRows): rows [16, 48) of each of
// four 64-row experts, from a real read-only file mapping. Packed where the kernels read the
// type packed (each expert's share then gives the mapped products, reading the packed copy
// alone), copied otherwise (F32: the same bytes at the same row indices); only the shares
// are counted as copied.
TEST(OwnedSlices, StridedRowSharesServeEveryExpertsRows) {
  constexpr int64_t kCols = 256, kStride = 64, kExperts = 4, kRows = kStride * kExperts;
  constexpr int64_t kRow0 = 16, kRow1 = 48;
  for (DType type : {DType::kF32, DType::kQ4_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    SCOPED_TRACE(DTypeName(type));
    const int64_t row_bytes = RowBytes(type, kCols);
    const bool packs = kernels::CanPackRows(type, kRow1 - kRow0, row_bytes);
    if (type != DType::kF32 && !packs) continue;  // no packed kernel on this CPU
    std::vector<uint8_t> bytes(static_cast<size_t>(kRows * row_bytes));
    std::vector<float> row(kCols);
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) row[c] = std::sin(0.29f * static_cast<float>(r * kCols + c)) * 1.5f;
      kernels::QuantizeRow(type, row.data(), bytes.data() + r * row_bytes, kCols);
    }
    char path[] = "/tmp/cohort-strided-XXXXXX";
    const int fd = ::mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
    void* map = ::mmap(nullptr, bytes.size(), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    ::unlink(path);
    ASSERT_NE(map, MAP_FAILED);
    const TensorView mapped = TensorView::Make(type, bytes.data(), {kCols, kStride, kExperts, 1});
    TensorView shared = mapped;
    shared.data = static_cast<const uint8_t*>(map);
    OwnedSlices owned;
    ASSERT_TRUE(owned.ShareStridedRows(&shared, kStride, kRow0, kRow1).ok());
    EXPECT_EQ(owned.bytes(), kExperts * (kRow1 - kRow0) * row_bytes);
    EXPECT_EQ(shared.packed != nullptr, packs);
    const std::vector<uint8_t> garbage(bytes.size(), 0x5a);
    for (int64_t e = 0; e < kExperts; ++e) {
      const int64_t r0 = e * kStride + kRow0, r1 = e * kStride + kRow1;
      TensorView got = shared.Rows(r0, r1);
      if (!packs) {
        EXPECT_NE(got.data, static_cast<const uint8_t*>(map) + r0 * row_bytes) << "a copy of its own";
        EXPECT_EQ(std::memcmp(got.data, bytes.data() + r0 * row_bytes, (r1 - r0) * row_bytes), 0) << e;
        continue;
      }
      ASSERT_NE(got.packed, nullptr);
      got.data = garbage.data();
      for (int64_t n_tokens : {1, 3}) {
        std::vector<float> x(static_cast<size_t>(kCols * n_tokens));
        for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.13f * static_cast<float>(i));
        std::vector<float> want(static_cast<size_t>((r1 - r0) * n_tokens)), out(want.size(), -1.0f);
        std::vector<uint8_t> scratch;
        kernels::MatMulExperts(mapped.Rows(r0, r1), x.data(), n_tokens, want.data(), nullptr, &scratch);
        kernels::MatMulExperts(got, x.data(), n_tokens, out.data(), nullptr, &scratch);
        EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0)
            << "expert " << e << " tokens " << n_tokens;
      }
    }
    ::munmap(map, bytes.size());
  }
}

}  // namespace
}  // namespace cohort::model::testing
