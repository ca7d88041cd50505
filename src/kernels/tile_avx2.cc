// AVX2 tile kernels (tile.h) for the legacy types: filled in by the AVX2 kernel work.
#include "kernels/tile.h"

namespace cohort::kernels::avx2 {

TileFn GetTile(DType weight, bool vnni) { return GetKTile(weight, vnni); }

TileFn GetTileGrouped(DType weight, bool vnni) { return GetKTileGrouped(weight, vnni); }

}  // namespace cohort::kernels::avx2
