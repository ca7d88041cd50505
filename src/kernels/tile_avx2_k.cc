// AVX2 tile kernels (tile.h) for the K-quants: filled in by the AVX2 kernel work.
#include "kernels/tile.h"

namespace cohort::kernels::avx2 {

TileFn GetKTile(DType, bool) { return nullptr; }

TileFn GetKTileGrouped(DType, bool) { return nullptr; }

}  // namespace cohort::kernels::avx2
