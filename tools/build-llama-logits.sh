#!/usr/bin/env bash
# Builds tools/llama_logits.cc (or SOURCE, another tool of tools/) against a llama.cpp build
# (bench/build-llamacpp.sh's layout: LLAMA_DIR/src and LLAMA_DIR/build) into OUT. Shared by the
# golden makers in tools/.
#   tools/build-llama-logits.sh LLAMA_DIR OUT [SOURCE]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama=$1
out=$2
source=${3:-$root/tools/llama_logits.cc}
g++ -std=c++17 -O2 -fopenmp -I"$llama/src/include" -I"$llama/src/ggml/include" \
  "$source" \
  "$llama/build/src/libllama.a" "$llama/build/ggml/src/libggml.a" \
  "$llama/build/ggml/src/libggml-cpu.a" "$llama/build/ggml/src/ggml-rpc/libggml-rpc.a" \
  "$llama/build/ggml/src/libggml-base.a" \
  -lpthread $(pkg-config --exists libibverbs && echo -libverbs) -o "$out"
