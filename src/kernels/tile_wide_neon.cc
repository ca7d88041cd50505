// NEON wide tile kernels (tile_wide.h) and the dot-product instantiation of tile_neon_impl.h:
// 16 rows x up to 8 tokens for Q4_0, Q8_0, Q4_K (both orders) and Q6_K, rows as stored or
// packed by PackRows, each bit-identical per (row, token) to the NEON vec-dot of its order.
#include "kernels/tile_wide.h"

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

// Everything below (the kernels included from tile_neon_impl.h) is compiled for sdot.
#pragma GCC target("arch=armv8.2-a+dotprod")
#include "kernels/tile_neon_impl.h"

namespace cohort::kernels::neon {

template WideTile WideTileOf<false>(DType, bool, bool);
template TileFn QuadTileOf<false>(DType, bool);

WideTile GetWideTile(DType weight, bool grouped, bool i8mm) {
  return i8mm ? WideTileOf<true>(weight, grouped, false) : WideTileOf<false>(weight, grouped, false);
}

WideTile GetWideTilePacked(DType weight, bool grouped, bool i8mm) {
  return i8mm ? WideTileOf<true>(weight, grouped, true) : WideTileOf<false>(weight, grouped, true);
}

}  // namespace cohort::kernels::neon

#else

namespace cohort::kernels::neon {
WideTile GetWideTile(DType, bool, bool) { return {}; }
WideTile GetWideTilePacked(DType, bool, bool) { return {}; }
}  // namespace cohort::kernels::neon

#endif
