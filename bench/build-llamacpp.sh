#!/usr/bin/env bash
# Builds llama.cpp (CPU only, Release, with llama-bench, ggml-rpc-server, llama-completion (the
# classic CLI; llama-cli needs the server build) and llama-eval-callback) from the git bundle of
# node-llama-cpp@3.22.1 that scripts/fetch-test-data.sh saved, never inside the source tree.
# Idempotent: skips when already built.
#   native (default): -march=native, into build/llama.cpp/build
#   avx2:             AVX2 + FMA + F16C only (no AVX-512, no AVX-VNNI), into build/llama.cpp-avx2,
#                     so that a machine with AVX-512 can measure llama.cpp's AVX2 path
#   avx512:           AVX-512 (F, BW, VL, VNNI, BF16, VBMI) and AVX-VNNI, AMX off, into
#                     build/llama.cpp-avx512: for VMs whose /proc/cpuinfo lists AMX that the
#                     guest cannot use (the native build dies there with SIGILL on `tilezero`)
# Both build from the one clone in build/llama.cpp/src.
# Usage: bench/build-llamacpp.sh [JOBS] [native|avx2|avx512]   (log: build/llama.cpp[-avx2]-build.log)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-2}
variant=${2:-native}
bundle="$root/build/external/llama.cpp.bundle"
src="$root/build/llama.cpp/src"
case "$variant" in
  native)
    out="$root/build/llama.cpp/build"
    log="$root/build/llama.cpp-build.log"
    isa_flags=(-DGGML_NATIVE=ON)
    ;;
  avx2)
    out="$root/build/llama.cpp-avx2"
    log="$root/build/llama.cpp-avx2-build.log"
    isa_flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON
               -DGGML_F16C=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
               -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
               -DGGML_AMX_BF16=OFF)
    ;;
  avx512)
    out="$root/build/llama.cpp-avx512"
    log="$root/build/llama.cpp-avx512-build.log"
    isa_flags=(-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_BMI2=ON -DGGML_FMA=ON
               -DGGML_F16C=ON -DGGML_AVX_VNNI=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON
               -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF
               -DGGML_AMX_BF16=OFF)
    ;;
  *)
    echo "build-llamacpp: unknown variant '$variant' (native, avx2 or avx512)" >&2
    exit 2
    ;;
esac

if [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/ggml-rpc-server" ] && [ -x "$out/bin/llama-completion" ] && [ -x "$out/bin/llama-eval-callback" ]; then
  exit 0
fi
[ -f "$bundle" ] || "$root/scripts/fetch-test-data.sh"
mkdir -p "$root/build/llama.cpp"
if [ ! -d "$src/.git" ]; then
  git clone --quiet "$bundle" "$src"
fi
{
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" -DGGML_RPC=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
  cmake --build "$out" -j"$jobs" --target llama-bench ggml-rpc-server llama-completion llama-eval-callback
} >"$log" 2>&1
echo "build-llamacpp: $variant binaries in $out/bin (log $log)"
