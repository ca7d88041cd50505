#!/usr/bin/env bash
# Builds llama.cpp (CPU only, Release, native ISA, with llama-bench, ggml-rpc-server, llama-completion (the classic CLI; llama-cli needs the server build) and llama-eval-callback) from the
# git bundle of node-llama-cpp@3.22.1 that scripts/fetch-test-data.sh saved, into
# build/llama.cpp — never inside the source tree. Idempotent: skips when already built.
# Usage: bench/build-llamacpp.sh [JOBS]   (log: build/llama.cpp-build.log)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${1:-2}
bundle="$root/build/external/llama.cpp.bundle"
src="$root/build/llama.cpp/src"
out="$root/build/llama.cpp/build"
log="$root/build/llama.cpp-build.log"

if [ -x "$out/bin/llama-bench" ] && [ -x "$out/bin/ggml-rpc-server" ] && [ -x "$out/bin/llama-completion" ] && [ -x "$out/bin/llama-eval-callback" ]; then
  exit 0
fi
[ -f "$bundle" ] || "$root/scripts/fetch-test-data.sh"
mkdir -p "$root/build/llama.cpp"
if [ ! -d "$src/.git" ]; then
  git clone --quiet "$bundle" "$src"
fi
{
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_RPC=ON \
    -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DGGML_OPENMP=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF
  cmake --build "$out" -j"$jobs" --target llama-bench ggml-rpc-server llama-completion llama-eval-callback
} >"$log" 2>&1
echo "build-llamacpp: binaries in $out/bin (log $log)"
