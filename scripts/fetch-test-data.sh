#!/usr/bin/env bash
# Fetches llama.cpp's tokenizer test vectors and chat templates from the npm package
# node-llama-cpp@3.22.1 (its git bundle of llama.cpp) into build/external. Not committed:
# the tests read them from there. Idempotent; does nothing when already fetched.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/build/external"
stamp="$dest/.fetched-node-llama-cpp-3.22.1"
[ -f "$stamp" ] && exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --silent node-llama-cpp@3.22.1 >/dev/null
tar xzf node-llama-cpp-3.22.1.tgz package/llama/gitRelease.bundle
git clone --quiet package/llama/gitRelease.bundle llama.cpp 2>/dev/null

mkdir -p "$dest/vocab" "$dest/templates"
cp llama.cpp/models/ggml-vocab-*.gguf* "$dest/vocab/"
cp llama.cpp/models/templates/*.jinja "$dest/templates/"
# Kept so bench/compare-llamacpp.sh can build llama.cpp from the same snapshot.
cp package/llama/gitRelease.bundle "$dest/llama.cpp.bundle"
touch "$stamp"
echo "fetch-test-data: vectors in $dest"
