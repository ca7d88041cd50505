#!/usr/bin/env bash
# Makes golden logits from llama.cpp for small `cohort synth` models whose features the tiny
# fixtures do not exercise (DeepSeek-V3's YaRN RoPE and grouped expert selection at its real
# head geometry; Qwen3-30B-A3B's 8-of-32 routing; gpt-oss's sinks, sliding window, biases and
# MXFP4 experts). A developer tool: run it once with a
# llama.cpp build (bench/compare-llamacpp.sh builds one into build/llama.cpp) and commit the
# files it writes under tests/data/synth-golden/. cohort synth is deterministic, so the test
# (tests/apps/synth_golden_test.cc) rebuilds the same models and compares.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama="${LLAMA_CPP_DIR:-$root/build/llama.cpp}"   # bench/build-llamacpp.sh's layout: src/ and build/
cohort="${COHORT_BIN:-$root/build/release/bin/cohort}"
out="$root/tests/data/synth-golden"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

g++ -std=c++17 -O2 -fopenmp -I"$llama/src/include" -I"$llama/src/ggml/include" \
  "$root/tools/llama_logits.cc" \
  "$llama/build/src/libllama.a" "$llama/build/ggml/src/libggml.a" \
  "$llama/build/ggml/src/libggml-cpu.a" "$llama/build/ggml/src/ggml-rpc/libggml-rpc.a" \
  "$llama/build/ggml/src/libggml-base.a" \
  -lpthread $(pkg-config --exists libibverbs && echo -libverbs) -o "$work/llama_logits"

# name shape type ids n_prompt
cases=(
  "deepseek-v3-mini deepseek-v3-mini q8_0 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8"
  "qwen3-30b-a3b-mini qwen3-30b-a3b-mini q8_0 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8"
  # gpt-oss: a 16-token prompt and 32 single-token steps cross the 8-position window.
  "gpt-oss-test gpt-oss-test f32 1,100,200,300,400,500,600,700,1000,2000,3000,4000,5000,6000,7000,8000,13,1010,2007,3004,4001,4998,5995,6992,7989,8986,9983,10980,11977,12974,13971,14968,15965,16962,17959,18956,19953,20950,21947,22944,23941,24938,25935,26932,27929,28926,29923,30920 16"
  "gpt-oss-test gpt-oss-test mxfp4 1,100,200,300,400,500,600,700,1000,2000,3000,4000,5000,6000,7000,8000,13,1010,2007,3004,4001,4998,5995,6992,7989,8986,9983,10980,11977,12974,13971,14968,15965,16962,17959,18956,19953,20950,21947,22944,23941,24938,25935,26932,27929,28926,29923,30920 16"
)
for c in "${cases[@]}"; do
  read -r name shape type ids n_prompt <<<"$c"
  "$cohort" synth --shape "$shape" --type "$type" --pure --layers 2 -o "$work/$name.gguf"
  "$work/llama_logits" "$work/$name.gguf" "$ids" "$n_prompt" "$out/$name-$type.logits.f32"
  printf '{"shape": "%s", "type": "%s", "layers": 2, "ids": [%s], "n_prompt": %s}\n' \
    "$shape" "$type" "$ids" "$n_prompt" >"$out/$name-$type.json"
  echo "made $out/$name-$type.logits.f32"
done
