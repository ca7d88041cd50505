#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs packages, fetches the
# llama.cpp test vectors, builds the release preset, runs every test not labelled slow, then
# runs the GGUF parser's tests (malformed corpus, truncations, fuzz seeds) under the address
# and undefined-behaviour sanitizers, and the kernels' tests cross-built for AArch64 (the
# NEON kernels) under qemu-aarch64.
#   scripts/test.sh              # default suite
#   scripts/test.sh -L slow      # extra ctest arguments replace the default selection
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
scripts/fetch-test-data.sh
scripts/setup-node.sh
jobs=$(nproc)

cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"

status=0
if [ "$#" -eq 0 ]; then set -- -LE slow; fi
(cd build/release && ctest --output-on-failure --timeout 900 -j "$jobs" "$@") || status=$?

if [ "$*" = "-LE slow" ]; then
  cmake --preset asan >/dev/null
  cmake --build --preset asan -j "$jobs" --target gguf_test
  (cd build/asan && ctest --output-on-failure --timeout 900 -j "$jobs" -R '^Gguf') || status=$?
  cmake --preset arm64 >/dev/null
  cmake --build --preset arm64 -j "$jobs"
  (cd build/arm64 && ctest --output-on-failure --timeout 900 -j "$jobs" -LE slow) || status=$?
fi
exit "$status"
