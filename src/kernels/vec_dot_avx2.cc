// AVX2 (+FMA, F16C) vec-dot kernels, compiled for generic x86-64 with per-function target
// attributes and chosen at run time (quant.cc). Each must agree with its scalar reference in
// quant_ref_*.cc; tests/kernels check that on odd sizes and misaligned rows.
#include "kernels/quant_internal.h"

namespace cohort::kernels::avx2 {

// Kernels are added type by type; a type without one here falls back to the scalar kernel.
VecDotFn GetVecDot(DType weight) { return nullptr; }

}  // namespace cohort::kernels::avx2

namespace cohort::kernels::avx512 {

VecDotFn GetVecDot(DType weight) { return nullptr; }

}  // namespace cohort::kernels::avx512
