// NEON tile kernels (tile.h): filled in by the ARM kernel work.
#include "kernels/tile.h"

namespace cohort::kernels::neon {

TileFn GetTile(DType, bool) { return nullptr; }

TileFn GetTileGrouped(DType, bool) { return nullptr; }

}  // namespace cohort::kernels::neon
