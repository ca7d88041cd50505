// The int8 matrix-multiply instantiation of the NEON tile kernels (tile_neon_impl.h): smmla
// for Q4_0's and Q4_K's integer block sums (2 rows x 2 tokens x 8 bytes per instruction),
// Armv8.6-A with FEAT_I8MM (Apple M2 on, Graviton 3 on). Chosen at run time (kNeonI8mm).
#include "kernels/tile_neon.h"

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
#include "kernels/tile_wide.h"

// Everything below (the kernels included from tile_neon_impl.h) is compiled for smmla and sdot.
#pragma GCC target("arch=armv8.6-a+i8mm+dotprod")
#include "kernels/tile_neon_impl.h"

namespace cohort::kernels::neon {

template WideTile WideTileOf<true>(DType, bool, bool);
template TileFn QuadTileOf<true>(DType, bool);

}  // namespace cohort::kernels::neon

#endif
