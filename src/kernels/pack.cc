// PackRows and UnpackRow; see pack.h. The layouts are the packed kernels' (tile_wide_avx512.cc,
// tile_wide_avx512_k.cc, tile_neon_impl.h), written here in portable code for every ISA.
#include "kernels/pack.h"

#include <cstring>

#include "core/check.h"
#include "core/tensor.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels {

namespace {

constexpr int64_t kGroup = TensorView::kPackRows;

// Q8_0: per chunk of blocks, each quad's scales, then its quants (Q8_0PackedLayout).
void PackQ8_0(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  const Q8_0PackedLayout layout{row_bytes / static_cast<int64_t>(sizeof(BlockQ8_0))};
  for (int64_t g = 0; g < n_rows / kGroup; ++g) {
    uint8_t* group = dst + g * kGroup * row_bytes;
    for (int k = 0; k < kGroup; ++k) {
      const auto* row = reinterpret_cast<const BlockQ8_0*>(src + (kGroup * g + k) * row_bytes);
      for (int64_t i = 0; i < layout.nb; ++i) {
        std::memcpy(group + layout.Scale(k, i), &row[i].d, layout.kScaleBytes);
        std::memcpy(group + layout.Quants(k, i), row[i].qs, layout.kQuantBytes);
      }
    }
  }
}

// Q6_K: stripes of kQ6KStripeRows rows, block by block (Q6KPackedLayout).
void PackQ6_K(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  const Q6KPackedLayout layout{row_bytes / Q6KPackedLayout::kBlockBytes};
  for (int64_t g = 0; g < n_rows / kGroup; ++g) {
    uint8_t* group = dst + g * kGroup * row_bytes;
    for (int k = 0; k < kGroup; ++k) {
      const uint8_t* row = src + (kGroup * g + k) * row_bytes;
      for (int64_t i = 0; i < layout.nb; ++i) {
        std::memcpy(group + layout.Block(k, i), row + i * layout.kBlockBytes, layout.kBlockBytes);
      }
    }
  }
}

// Q4_0: per block, the 16 rows' scales, then word c of the 16 rows' qs for c = 0..3 (the
// layout the x86 and NEON Q4_0 packed kernels read).
void PackQ4_0(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  const int64_t nb = row_bytes / static_cast<int64_t>(sizeof(BlockQ4_0));
  for (int64_t g = 0; g < n_rows / kGroup; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* b = dst + g * kGroup * row_bytes + i * kGroup * static_cast<int64_t>(sizeof(BlockQ4_0));
      for (int r = 0; r < kGroup; ++r) {
        const auto* x = reinterpret_cast<const BlockQ4_0*>(src + (kGroup * g + r) * row_bytes) + i;
        std::memcpy(b + 2 * r, &x->d, 2);
        for (int c = 0; c < 4; ++c) std::memcpy(b + 32 + 64 * c + 4 * r, x->qs + 4 * c, 4);
      }
    }
  }
}

// Q4_K: blocks as 16-byte segments, each the 16 rows' word j at 64j (PackSegments16's layout).
void PackSegments16(const uint8_t* src, int64_t row_bytes, int64_t n_rows, int64_t block_bytes, uint8_t* dst) {
  const int64_t nb = row_bytes / block_bytes;
  for (int64_t g = 0; g < n_rows / kGroup; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* b = dst + g * kGroup * row_bytes + i * kGroup * block_bytes;
      for (int64_t seg = 0; seg < block_bytes / 16; ++seg) {
        for (int r = 0; r < kGroup; ++r) {
          const uint8_t* x = src + (kGroup * g + r) * row_bytes + i * block_bytes + 16 * seg;
          for (int j = 0; j < 4; ++j) std::memcpy(b + 256 * seg + 64 * j + 4 * r, x + 4 * j, 4);
        }
      }
    }
  }
}

// IQ4_XS: per super-block the 16 rows' d (2 bytes each), scales_h (2), scales_l (4), then per
// sub-block of 16 quant bytes the 16 rows' word c at 64c (tile_wide_avx512_iq.cc's Iq4XsPacked).
constexpr int64_t kIq4XsQuants = 128;  // the head's bytes: 16 x (2 + 2 + 4)
// Where byte `stored` of row r's block goes in the 16 rows' packed block.
int64_t Iq4XsPackedOffset(int64_t r, int64_t stored) {
  if (stored < 2) return 2 * r + stored;
  if (stored < 4) return 32 + 2 * r + stored - 2;
  if (stored < 8) return 64 + 4 * r + stored - 4;
  const int64_t q = stored - 8;  // the quants' byte q: sub-block q / 16, word q % 16 / 4
  return kIq4XsQuants + 256 * (q / 16) + 64 * (q % 16 / 4) + 4 * r + q % 4;
}

void PackIq4Xs(const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  constexpr int64_t kBlock = sizeof(BlockIq4Xs);
  const int64_t nb = row_bytes / kBlock;
  for (int64_t g = 0; g < n_rows / kGroup; ++g) {
    for (int64_t i = 0; i < nb; ++i) {
      uint8_t* b = dst + g * kGroup * row_bytes + i * kGroup * kBlock;
      for (int r = 0; r < kGroup; ++r) {
        const uint8_t* x = src + (kGroup * g + r) * row_bytes + i * kBlock;
        // Whole words: d, scales_h, scales_l, then the quants 4 bytes at a time.
        for (int64_t off : {0, 2}) std::memcpy(b + Iq4XsPackedOffset(r, off), x + off, 2);
        for (int64_t off = 4; off < kBlock; off += 4) std::memcpy(b + Iq4XsPackedOffset(r, off), x + off, 4);
      }
    }
  }
}

}  // namespace

bool CanPackRows(DType type, int64_t n_rows, int64_t row_bytes) {
  return (type == DType::kQ4_0 || type == DType::kQ4_K || type == DType::kQ8_0 || type == DType::kQ6_K ||
          type == DType::kIQ4_XS) &&
         n_rows > 0 && n_rows % TensorView::kPackRows == 0 &&
         row_bytes * TensorView::kPackRows < (int64_t{1} << 31) &&
         GetWideTilePacked(type, BestSimdLevel(), false).fn != nullptr;
}

bool PackedColumnsSlice(DType type) { return type == DType::kQ4_0 || type == DType::kQ4_K; }

void PackRows(DType type, const uint8_t* src, int64_t row_bytes, int64_t n_rows, uint8_t* dst) {
  COHORT_CHECK(CanPackRows(type, n_rows, row_bytes));
  switch (type) {
    case DType::kQ4_K: PackSegments16(src, row_bytes, n_rows, Traits(type).type_size, dst); break;
    case DType::kQ4_0: PackQ4_0(src, row_bytes, n_rows, dst); break;
    case DType::kQ6_K: PackQ6_K(src, row_bytes, n_rows, dst); break;
    case DType::kIQ4_XS: PackIq4Xs(src, row_bytes, n_rows, dst); break;
    default: PackQ8_0(src, row_bytes, n_rows, dst); break;  // kQ8_0, as CanPackRows allows
  }
}

void UnpackRow(DType type, const uint8_t* packed, int64_t row_bytes, int64_t r, uint8_t* dst) {
  const int64_t block_bytes = Traits(type).type_size;
  const int64_t nb = row_bytes / block_bytes;
  const int64_t k = r % kGroup;  // the row within its group
  const uint8_t* group = packed + (r - k) * row_bytes;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t* out = dst + i * block_bytes;
    const uint8_t* in = group + i * kGroup * block_bytes;  // Q4_0, Q4_K: block i of every row
    switch (type) {
      case DType::kQ4_0:  // 16 scales, then word c of every row's qs, c = 0..3 (PackQ4_0)
        std::memcpy(out, in + 2 * k, 2);
        for (int c = 0; c < 4; ++c) std::memcpy(out + 2 + 4 * c, in + 32 + 64 * c + 4 * k, 4);
        break;
      case DType::kQ4_K:  // per 16-byte segment, word j of every row (PackSegments16)
        for (int64_t seg = 0; seg < block_bytes / 16; ++seg) {
          for (int j = 0; j < 4; ++j) std::memcpy(out + 16 * seg + 4 * j, in + 256 * seg + 64 * j + 4 * k, 4);
        }
        break;
      case DType::kIQ4_XS: {
        for (int64_t off : {0, 2}) std::memcpy(out + off, in + Iq4XsPackedOffset(k, off), 2);
        for (int64_t off = 4; off < block_bytes; off += 4) std::memcpy(out + off, in + Iq4XsPackedOffset(k, off), 4);
        break;
      }
      case DType::kQ6_K: {
        const Q6KPackedLayout layout{nb};
        std::memcpy(out, group + layout.Block(static_cast<int>(k), i), block_bytes);
        break;
      }
      default: {  // kQ8_0
        const Q8_0PackedLayout layout{nb};
        std::memcpy(out, group + layout.Scale(static_cast<int>(k), i), layout.kScaleBytes);
        std::memcpy(out + layout.kScaleBytes, group + layout.Quants(static_cast<int>(k), i), layout.kQuantBytes);
        break;
      }
    }
  }
}

}  // namespace cohort::kernels
