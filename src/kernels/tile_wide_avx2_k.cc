// AVX2 wide tile kernels (tile_wide.h) for the K-quants: filled in by the AVX2 kernel work.
#include "kernels/tile_wide.h"

namespace cohort::kernels::avx2 {

WideTile GetWideTileK(DType, bool, bool) { return {}; }

WideTile GetWideTilePackedK(DType, bool, bool) { return {}; }

}  // namespace cohort::kernels::avx2
