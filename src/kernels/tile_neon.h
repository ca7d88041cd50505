// The NEON tile kernels' entry points, one set per instantiation: the dot-product one
// (tile_wide_neon.cc, sdot) and the int8 matrix-multiply one (tile_wide_neon_i8mm.cc, smmla
// for the integer block sums where they are whole-block sums). Both are compiled from
// tile_neon_impl.h, each under its own target. Internal to src/kernels.
#pragma once

#include "core/dtype.h"
#include "kernels/tile.h"
#include "kernels/tile_wide.h"

namespace cohort::kernels::neon {

// The 16-row wide tile for `weight` in GetVecDot's order (grouped = false) or
// GetVecDotGrouped's, reading rows as stored (packed = false) or packed by PackRows. Empty if
// none. kI8mm: the smmla instantiation.
template <bool kI8mm>
WideTile WideTileOf(DType weight, bool grouped, bool packed);

// The 4-row tile (tile.h) for the rows a wide tile leaves over; nullptr if none.
template <bool kI8mm>
TileFn QuadTileOf(DType weight, bool grouped);

// Each instantiation is compiled in its own file, for its own target, and only there.
extern template WideTile WideTileOf<false>(DType, bool, bool);  // tile_wide_neon.cc
extern template TileFn QuadTileOf<false>(DType, bool);
extern template WideTile WideTileOf<true>(DType, bool, bool);  // tile_wide_neon_i8mm.cc
extern template TileFn QuadTileOf<true>(DType, bool);

}  // namespace cohort::kernels::neon
