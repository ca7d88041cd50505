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

"$root/tools/build-llama-logits.sh" "$llama" "$work/llama_logits"

only="${1:-.}"  # a regex: make only the cases whose name matches

# name shape type ids n_prompt [layers (default 2)]. Qwen3.5's cases keep 4 layers, so that
# the 4th, a gated full-attention layer, follows three DeltaNet layers. Its dense case is F32:
# a recurrent state carries any one-step rounding flip of a quantized activation into every
# later position, which the F32 path does not have.
cases=(
  "deepseek-v3-mini deepseek-v3-mini q8_0 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8"
  "qwen3-30b-a3b-mini qwen3-30b-a3b-mini q8_0 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8"
  "qwen3.5-0.8b qwen3.5-0.8b f32 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8 4"
  "qwen3.5-35b-a3b-mini qwen3.5-35b-a3b-mini q8_0 1,100,200,300,400,500,600,700,1000,2000,3000,4000 8 4"
  # gpt-oss: a 16-token prompt and 32 single-token steps cross the 8-position window.
  "gpt-oss-test gpt-oss-test f32 1,100,200,300,400,500,600,700,1000,2000,3000,4000,5000,6000,7000,8000,13,1010,2007,3004,4001,4998,5995,6992,7989,8986,9983,10980,11977,12974,13971,14968,15965,16962,17959,18956,19953,20950,21947,22944,23941,24938,25935,26932,27929,28926,29923,30920 16"
  "gpt-oss-test gpt-oss-test mxfp4 1,100,200,300,400,500,600,700,1000,2000,3000,4000,5000,6000,7000,8000,13,1010,2007,3004,4001,4998,5995,6992,7989,8986,9983,10980,11977,12974,13971,14968,15965,16962,17959,18956,19953,20950,21947,22944,23941,24938,25935,26932,27929,28926,29923,30920 16"
)
# ONLY="name ..." makes those cases only.
for c in "${cases[@]}"; do
  read -r name shape type ids n_prompt layers <<<"$c"
  layers=${layers:-2}
  [[ "$name-$type" =~ $only ]] || continue
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then continue; fi
  "$cohort" synth --shape "$shape" --type "$type" --pure --layers "$layers" -o "$work/$name.gguf"
  "$work/llama_logits" "$work/$name.gguf" "$ids" "$n_prompt" "$out/$name-$type.logits.f32"
  printf '{"shape": "%s", "type": "%s", "layers": %s, "ids": [%s], "n_prompt": %s}\n' \
    "$shape" "$type" "$layers" "$ids" "$n_prompt" >"$out/$name-$type.json"
  echo "made $out/$name-$type.logits.f32"
done

# Whole small models of the architectures without a tiny fixture of their own (glm4moe with
# its MTP block, minimax-m2), with the fixtures' 512-token vocabulary so that the goldens stay
# small: the fixtures' prompt [1, 10, ..., 150] as one batch, then 32 greedy steps of llama.cpp
# (tests/parallel/arch_golden_test.cc checks one process and 2-4 ranks against them).
vocab="$root/tests/data/fixtures/models/tiny-llama-f32.gguf"
prompt=1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150
# name shape type [layers (default: all)]. Qwen3.5 keeps 4 layers (three DeltaNet, then gated
# full attention) and gpt-oss-test its 2 (a 16-token prompt and 32 steps cross its 8-position
# window); those are --pure, as their cases above are.
arch_cases=(
  "glm-4.5-air-mini glm-4.5-air-mini f32"
  "glm-4.5-air-mini glm-4.5-air-mini q8_0"
  "glm-4.5-air-mini glm-4.5-air-mini q4_k_m"
  "minimax-m2-mini minimax-m2-mini f32"
  "minimax-m2-mini minimax-m2-mini q8_0"
  "minimax-m2-mini minimax-m2-mini q4_k_m"
  "qwen3.5-0.8b-tiny-vocab qwen3.5-0.8b f32 4"
  "qwen3.5-35b-a3b-mini-tiny-vocab qwen3.5-35b-a3b-mini q8_0 4"
  "gpt-oss-test-tiny-vocab gpt-oss-test f32 2"
  "gpt-oss-test-tiny-vocab gpt-oss-test mxfp4 2"
)
for c in "${arch_cases[@]}"; do
  read -r name shape type layers <<<"$c"
  [[ "$name-$type" =~ $only ]] || continue
  flags=() layers_json=""
  if [ -n "${layers:-}" ]; then
    flags=(--pure --layers "$layers")
    layers_json=", \"layers\": $layers"
  fi
  "$cohort" synth --shape "$shape" --type "$type" "${flags[@]}" --vocab "$vocab" -o "$work/$name.gguf"
  greedy=$("$work/llama_logits" "$work/$name.gguf" "$prompt" 16 "$out/$name-$type.logits.f32" 32)
  printf '{"shape": "%s", "type": "%s"%s, "vocab": "fixtures/models/tiny-llama-f32.gguf", "prompt_ids": [%s], "greedy_ids": [%s]}\n' \
    "$shape" "$type" "$layers_json" "$prompt" "$greedy" >"$out/$name-$type.json"
  echo "made $out/$name-$type.logits.f32"
done
