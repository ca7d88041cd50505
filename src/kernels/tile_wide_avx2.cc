// AVX2 (+FMA, F16C) and AVX-VNNI wide tile kernels (tile_wide.h) for Q4_0 and Q8_0 against
// Q8_0 activations, on the stored rows and on the packed copy (pack.h, the layouts the AVX-512
// kernels read), bit-identical per (row, token) to the AVX2 vec-dots (vec_dot_avx2.cc). The
// kernels are written once (tile_wide_avx2_kernels.h) and compiled twice here, once per
// level; the other types go to the K-quant file.
#include <algorithm>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "kernels/simd_x86.h"
#include "kernels/tile_wide.h"
#include "kernels/tile_wide_x86.h"

namespace cohort::kernels::avx2 {

#if defined(__x86_64__) || defined(__i386__)
namespace {

namespace plain {
inline constexpr bool kVnni = false;
#define COHORT_TILE_TARGET __attribute__((target("avx2,fma,f16c")))
#include "kernels/tile_wide_avx2_kernels.h"
#undef COHORT_TILE_TARGET
}  // namespace plain

namespace vnni {
inline constexpr bool kVnni = true;
#define COHORT_TILE_TARGET __attribute__((target("avx2,fma,f16c,avxvnni")))
#include "kernels/tile_wide_avx2_kernels.h"
#undef COHORT_TILE_TARGET
}  // namespace vnni

WideTile Legacy(DType weight, bool packed, bool use_vnni) {
  return use_vnni ? vnni::WideTileOf(weight, packed) : plain::WideTileOf(weight, packed);
}

}  // namespace

WideTile GetWideTile(DType weight, bool grouped, bool vnni) {
  // Q4_0's and Q8_0's AVX2 vec-dots take one order for single tokens and batches alike.
  const WideTile t = Legacy(weight, /*packed=*/false, vnni);
  return t.fn != nullptr ? t : GetWideTileK(weight, grouped, vnni);
}

WideTile GetWideTilePacked(DType weight, bool grouped, bool vnni) {
  const WideTile t = Legacy(weight, /*packed=*/true, vnni);
  return t.fn != nullptr ? t : GetWideTilePackedK(weight, grouped, vnni);
}

#else

WideTile GetWideTile(DType weight, bool grouped, bool vnni) { return GetWideTileK(weight, grouped, vnni); }
WideTile GetWideTilePacked(DType weight, bool grouped, bool vnni) {
  return GetWideTilePackedK(weight, grouped, vnni);
}

#endif

}  // namespace cohort::kernels::avx2
