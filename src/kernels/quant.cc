// The public quant.h entry points: type checks, and dispatch to the scalar reference or to
// the SIMD kernels the running CPU supports (chosen at run time; the build is generic x86-64).
#include "kernels/quant.h"

#include <array>
#include <cstdlib>
#include <string>
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

#include "core/check.h"
#include "kernels/ggml_sums.h"
#include "kernels/quant_internal.h"
#include "kernels/quant_tq.h"

namespace cohort::kernels {
namespace {

struct CpuLevels {
  std::array<SimdLevel, 4> levels{};
  int count = 0;
};

CpuLevels DetectLevels() {
  CpuLevels out;
  out.levels[out.count++] = SimdLevel::kScalar;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (avx2) out.levels[out.count++] = SimdLevel::kAvx2;
  if (avx2 && __builtin_cpu_supports("avxvnni")) out.levels[out.count++] = SimdLevel::kAvxVnni;
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni")) {
    out.levels[out.count++] = SimdLevel::kAvx512;
  }
#endif
#if defined(__aarch64__) && defined(__linux__)
  if (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) {
    out.levels[out.count++] = SimdLevel::kNeonDot;
    if (getauxval(AT_HWCAP2) & HWCAP2_I8MM) out.levels[out.count++] = SimdLevel::kNeonI8mm;
  }
#elif defined(__aarch64__) && defined(__APPLE__)
  out.levels[out.count++] = SimdLevel::kNeonDot;  // every Apple CPU since the M1 has sdot
#endif
  return out;
}

// CPU features cannot change while the process runs, so they are read once; this constant
// is the only process-wide state in kernels.
const CpuLevels& Levels() {
  static const CpuLevels levels = DetectLevels();
  return levels;
}

struct ChosenLevel {
  SimdLevel level = SimdLevel::kScalar;
  Status status;
};

// COHORT_SIMD, read once with the CPU's levels: the level the kernels run at.
const ChosenLevel& Chosen() {
  static const ChosenLevel chosen = [] {
    const CpuLevels& cpu = Levels();
    ChosenLevel c{cpu.levels[cpu.count - 1], Status::Ok()};
    const char* env = std::getenv("COHORT_SIMD");
    if (env == nullptr || *env == '\0') return c;
    std::string runs;
    for (int i = 0; i < cpu.count; ++i) runs += std::string(i ? ", " : "") + SimdLevelName(cpu.levels[i]);
    SimdLevel wanted;
    if (!ParseSimdLevel(env, &wanted)) {
      c.status = InvalidArgument(std::string("COHORT_SIMD=") + env +
                                         ": not a SIMD level (scalar, avx2, avx_vnni, avx512, neon, neon_i8mm); this CPU runs " + runs);
      return c;
    }
    for (int i = 0; i < cpu.count; ++i) {
      if (cpu.levels[i] == wanted) {
        c.level = wanted;
        return c;
      }
    }
    c.status = InvalidArgument(std::string("COHORT_SIMD=") + env + ": this CPU cannot run it; it runs " + runs);
    return c;
  }();
  return chosen;
}

}  // namespace

SimdLevel BestSimdLevel() { return Chosen().level; }

Status SimdOverrideStatus() { return Chosen().status; }

std::span<const SimdLevel> SupportedSimdLevels() {
  return {Levels().levels.data(), static_cast<size_t>(Levels().count)};
}

const char* SimdLevelName(SimdLevel level) {
  switch (level) {
    case SimdLevel::kScalar: return "scalar";
    case SimdLevel::kAvx2: return "avx2";
    case SimdLevel::kAvxVnni: return "avx_vnni";
    case SimdLevel::kAvx512: return "avx512";
    case SimdLevel::kNeonDot: return "neon";
    case SimdLevel::kNeonI8mm: return "neon_i8mm";
  }
  return "?";
}

bool ParseSimdLevel(std::string_view name, SimdLevel* level) {
  for (SimdLevel l : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvxVnni, SimdLevel::kAvx512,
                      SimdLevel::kNeonDot, SimdLevel::kNeonI8mm}) {
    if (name == SimdLevelName(l)) {
      *level = l;
      return true;
    }
  }
  if (name == "neon-dotprod") {
    *level = SimdLevel::kNeonDot;
    return true;
  }
  return false;
}

bool IsWeightType(DType type) {
  switch (type) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ4_0:
    case DType::kQ4_1:
    case DType::kQ5_0:
    case DType::kQ5_1:
    case DType::kQ8_0:
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ2_XXS:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ4_NL:
    case DType::kIQ4_XS:
    case DType::kTQ1_0:
    case DType::kTQ2_0:
    case DType::kMXFP4: return true;
    default: return false;
  }
}

bool IsRowType(DType type) {
  return IsWeightType(type) || type == DType::kQ8_1 || type == DType::kQ8_K;
}

DType VecDotType(DType weight) {
  switch (weight) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
    case DType::kIQ4_NL:
    case DType::kMXFP4: return DType::kQ8_0;
    case DType::kQ4_1:
    case DType::kQ5_1: return DType::kQ8_1;
    case DType::kQ2_K:
    case DType::kQ3_K:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
    case DType::kIQ2_XXS:
    case DType::kIQ3_XXS:
    case DType::kIQ3_S:
    case DType::kIQ1_S:
    case DType::kIQ1_M:
    case DType::kIQ2_XS:
    case DType::kIQ2_S:
    case DType::kIQ4_XS:
    case DType::kTQ1_0:
    case DType::kTQ2_0: return DType::kQ8_K;
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: return weight;
    default: COHORT_CHECK(false && "not a weight type");
  }
  __builtin_unreachable();
}

void DequantizeRow(DType type, const void* src, float* dst, int64_t n) {
  COHORT_CHECK(IsRowType(type));
  COHORT_CHECK_EQ(n % Traits(type).block_size, 0);
  if (type == DType::kMXFP4) {
    ref::DequantizeMxfp4Row(src, dst, n);
  } else if (ref::IsTernaryType(type)) {
    ref::DequantizeTernaryRow(type, src, dst, n);
  } else if (ref::IsIqType(type)) {
    ref::DequantizeIqRow(type, src, dst, n);
  } else if (ref::IsKType(type)) {
    ref::DequantizeKRow(type, src, dst, n);
  } else {
    ref::DequantizeLegacyRow(type, src, dst, n);
  }
}

void QuantizeRow(DType type, const float* src, void* dst, int64_t n) {
  COHORT_CHECK(IsRowType(type));
  COHORT_CHECK_EQ(n % Traits(type).block_size, 0);
  if (type == DType::kMXFP4) {
    ref::QuantizeMxfp4Row(src, dst, n);
  } else if (ref::IsTernaryType(type)) {
    ref::QuantizeTernaryRow(type, src, dst, n);
  } else if (ref::IsIqType(type)) {
    ref::QuantizeIqRow(type, src, dst, n);
  } else if (ref::IsKType(type)) {
    ref::QuantizeKRow(type, src, dst, n);
  } else if (!HasAvx512(BestSimdLevel()) || !avx512::QuantizeRow(type, src, dst, n)) {
    ref::QuantizeLegacyRow(type, src, dst, n);
  }
}

bool TakesImportance(DType type) { return type == DType::kIQ4_NL || type == DType::kIQ4_XS; }

void QuantizeRowWeighted(DType type, const float* src, void* dst, int64_t n, const float* importance) {
  COHORT_CHECK(TakesImportance(type));
  COHORT_CHECK_EQ(n % Traits(type).block_size, 0);
  ref::QuantizeIq4Row(type, src, dst, n, importance);
}

namespace {

// F32 weights in llama.cpp's orders (ggml_sums.h): ggml_vec_dot_f32 for a token alone; sgemm's
// 16 lanes for batches, where k is a multiple of 16 (else llama.cpp falls back to vec_dot).
float F32VecDotOrder(const void* w, const void* a, int64_t n) {
  return DotGgml(static_cast<const float*>(w), static_cast<const float*>(a), n);
}
float F32SgemmOrder(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const float*>(w);
  const auto* y = static_cast<const float*>(a);
  return n % 16 == 0 ? DotSgemm(x, y, n) : DotGgml(x, y, n);
}

// ggml's F32 sums with fused multiply-adds: every level with an FMA unit, and every level of
// an x86 build (the scalar one too: it reproduces the x86 kernels, quant_ref_x86.cc).
bool F32InGgmlOrder(SimdLevel level) {
#if defined(__x86_64__) || defined(__i386__)
  (void)level;
  return true;
#else
  return HasFmaUnit(level);
#endif
}

// aarch64 builds: the grid i-quants (IQ2_XXS, IQ1_S, IQ1_M) follow llama.cpp's ARM NEON kernels at every
// level, the scalar one included; llama.cpp's ARM build has no panel GEMM, so its batches take
// the same order. nullptr elsewhere.
VecDotFn ArmOrderVecDot(DType weight) {
#if defined(__aarch64__)
  if (VecDotFn fn = ref::GetIq3ArmOrderVecDot(weight)) return fn;  // IQ3_XXS, IQ3_S
  return ref::GetIqGridArmOrderVecDot(weight);
#else
  (void)weight;
  return nullptr;
#endif
}

// The i-quants: every level sums in llama.cpp's x86 order (ref::GetIqX86OrderVecDot), ARM's
// too for IQ4_NL/IQ4_XS, so that llama.cpp's x86 goldens hold to the bit everywhere; the grid
// i-quants on ARM in llama.cpp's ARM order (ArmOrderVecDot).
VecDotFn GetIqVecDot(DType weight, SimdLevel level) {
  if (HasAvx512(level)) {
    if (VecDotFn fn = avx512::GetIqVecDot(weight)) return fn;
  }
  if (HasAvx2(level)) {
    if (VecDotFn fn = avx2::GetIqVecDot(weight)) return fn;
  }
  if (HasNeonDot(level)) {
    if (VecDotFn fn = neon::GetIqVecDot(weight)) return fn;
  }
  if (VecDotFn fn = ArmOrderVecDot(weight)) return fn;
  return ref::GetIqX86OrderVecDot(weight);
}

VecDotFn GetIqVecDotGrouped(DType weight, SimdLevel level) {
  if (ArmOrderVecDot(weight) != nullptr) return GetIqVecDot(weight, level);
  if (HasAvx512(level)) {
    if (VecDotFn fn = avx512::GetIqVecDotGrouped(weight)) return fn;
  }
  if (HasAvx2(level)) {
    if (VecDotFn fn = avx2::GetIqVecDotGrouped(weight)) return fn;
  }
  if (HasNeonDot(level)) {
    if (VecDotFn fn = neon::GetIqVecDotGrouped(weight)) return fn;
  }
  return ref::GetIqX86OrderVecDotGrouped(weight);
}

// TQ1_0 / TQ2_0: llama.cpp's x86 order at every level of an x86 build (AVX-512 takes the AVX2
// kernel, as llama.cpp's AVX-512 build does), its ARM order at every level of an aarch64 one.
// A batch takes the same kernel: llama.cpp has no GEMM for these types.
VecDotFn GetTernaryVecDot(DType weight, SimdLevel level) {
  if (HasAvx2(level)) return avx2::GetTernaryVecDot(weight);
  if (HasNeonDot(level)) return neon::GetTernaryVecDot(weight);
#if defined(__aarch64__)
  return ref::GetTernaryArmOrderVecDot(weight);
#else
  return ref::GetTernaryX86OrderVecDot(weight);
#endif
}

}  // namespace

VecDotFn GetVecDot(DType weight, SimdLevel level) {
  COHORT_CHECK(IsWeightType(weight));
  if (weight == DType::kF32 && F32InGgmlOrder(level)) return F32VecDotOrder;
  if (weight == DType::kMXFP4) {
    // AVX2 and up: the order of llama.cpp's repacked x86 kernels (quant_internal.h).
    if (HasAvx2(level)) return avx2::GetMxfp4VecDot();
    return ref::VecDotMxfp4Q8_0;
  }
  if (ref::IsIqType(weight)) return GetIqVecDot(weight, level);
  if (ref::IsTernaryType(weight)) return GetTernaryVecDot(weight, level);
  if (HasAvx512(level)) {
    if (VecDotFn fn = avx512::GetVecDot(weight)) return fn;
  }
  if (HasAvx2(level)) {
    if (VecDotFn fn = avx2::GetVecDot(weight)) return fn;
  }
  if (HasNeonDot(level)) {
    if (VecDotFn fn = neon::GetVecDot(weight)) return fn;
  }
#if defined(__x86_64__) || defined(__i386__)
  // x86 builds: the scalar level sums in the x86 kernels' order (quant_ref_x86.cc).
  if (VecDotFn fn = ref::GetX86OrderVecDot(weight)) return fn;
#endif
  VecDotFn fn = ref::IsKType(weight) ? ref::GetKVecDot(weight) : ref::GetLegacyVecDot(weight);
  COHORT_CHECK(fn != nullptr);
  return fn;
}

VecDotFn GetVecDotGrouped(DType weight, SimdLevel level) {
  if (ref::IsIqType(weight)) return GetIqVecDotGrouped(weight, level);
  if (ref::IsTernaryType(weight)) return GetTernaryVecDot(weight, level);
  if (weight == DType::kQ4_K && HasAvx2(level)) return avx2::GetKVecDotGrouped(weight);
  if (weight == DType::kF32 && F32InGgmlOrder(level)) return F32SgemmOrder;
  if (HasNeonDot(level)) {
    if (VecDotFn fn = neon::GetVecDotGrouped(weight)) return fn;
  }
#if defined(__x86_64__) || defined(__i386__)
  if (weight == DType::kQ4_K) return ref::GetX86OrderVecDotGrouped(weight);
#endif
  return GetVecDot(weight, level);
}

float VecDot(DType weight, const void* w_row, const void* act_row, int64_t n) {
  COHORT_CHECK_EQ(n % Traits(weight).block_size, 0);
  return GetVecDot(weight, BestSimdLevel())(w_row, act_row, n);
}

}  // namespace cohort::kernels
