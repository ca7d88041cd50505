// NEON 4-row tile kernels (tile.h) for the rows a wide tile leaves over: one quad of
// tile_neon_impl.h's kernels, the missing rows of a short tile reading its last row again.
#include "kernels/tile.h"

#include "kernels/tile_neon.h"

namespace cohort::kernels::neon {

#if defined(__aarch64__)

TileFn GetTile(DType weight, bool i8mm) {
  return i8mm ? QuadTileOf<true>(weight, false) : QuadTileOf<false>(weight, false);
}

TileFn GetTileGrouped(DType weight, bool i8mm) {
  return i8mm ? QuadTileOf<true>(weight, true) : QuadTileOf<false>(weight, true);
}

#else

TileFn GetTile(DType, bool) { return nullptr; }
TileFn GetTileGrouped(DType, bool) { return nullptr; }

#endif

}  // namespace cohort::kernels::neon
