// AVX2 wide tile kernels (tile_wide.h) for Q4_0 and Q8_0: filled in by the AVX2 kernel work.
#include "kernels/tile_wide.h"

namespace cohort::kernels::avx2 {

WideTile GetWideTile(DType weight, bool grouped, bool vnni) { return GetWideTileK(weight, grouped, vnni); }

WideTile GetWideTilePacked(DType weight, bool grouped, bool vnni) {
  return GetWideTilePackedK(weight, grouped, vnni);
}

}  // namespace cohort::kernels::avx2
