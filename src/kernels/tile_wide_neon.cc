// NEON wide tile kernels (tile_wide.h): filled in by the ARM kernel work.
#include "kernels/tile_wide.h"

namespace cohort::kernels::neon {

WideTile GetWideTile(DType, bool, bool) { return {}; }

WideTile GetWideTilePacked(DType, bool, bool) { return {}; }

}  // namespace cohort::kernels::neon
