#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs packages, fetches the
# llama.cpp test vectors, builds the release preset, and runs every test not labelled slow.
#   scripts/test.sh              # default suite
#   scripts/test.sh -L slow      # extra ctest arguments are passed through
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
scripts/fetch-test-data.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
cd build/release
if [ "$#" -eq 0 ]; then set -- -LE slow; fi
ctest --output-on-failure --timeout 900 -j "$(nproc)" "$@"
