#!/usr/bin/env bash
# Makes llama.cpp's logits with a Q8_0 KV cache (-ctk q8_0 -ctv q8_0, flash attention on, and
# the Walsh-Hadamard rotation llama.cpp then applies to q, k and v at its default: on) for
# models fed as the fixtures' goldens are: the prompt as one batch, then the greedy ids one at
# a time. A developer tool: run it once with a llama.cpp build and commit what it writes under
# tests/data/kv-q8_0/, which tests/model/kv_q8_0_test.cc compares cohort's --kv-type q8_0
# logits with.
#   - fixtures (NAME.logits.f32): the ids from tests/data/fixtures/golden/NAME.golden.json;
#   - `cohort synth` models with the fixtures' 512-token vocabulary (NAME-TYPE.logits.f32 and
#     NAME-TYPE.json), for what the fixtures lack: gpt-oss's window and sinks, a 128-wide head
#     (glm4moe: a 128-point key rotation), Qwen3.5's gated attention (256-wide heads); the
#     fixtures' prompt, then 32 greedy steps of llama.cpp. cohort synth is deterministic, so
#     the test rebuilds the same models.
#   tools/make-kv-q8_0-goldens.sh [NAME...]   (LLAMA_CPP_DIR: src/ and build/ of llama.cpp;
#                                              COHORT_BIN: a cohort binary for synth)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama="${LLAMA_CPP_DIR:-$root/build/llama.cpp}"
cohort="${COHORT_BIN:-$root/build/release/bin/cohort}"
out="$root/tests/data/kv-q8_0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
# The goldens are llama.cpp's default behaviour: with this set it would skip the rotation.
unset LLAMA_ATTN_ROT_DISABLE
"$root/tools/build-llama-logits.sh" "$llama" "$work/llama_logits"
wanted() { [ ${#names[@]} -eq 0 ] || [[ " ${names[*]} " == *" $1 "* ]]; }
names=("$@")
for name in tiny-llama-f32 tiny-llama-q4_0 tiny-qwen3-q8_0; do
  wanted "$name" || continue
  golden="$root/tests/data/fixtures/golden/$name.golden.json"
  read -r ids n_prompt < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); ids=j["prompt_ids"]+j["greedy_ids"]; print(",".join(map(str,ids)), len(j["prompt_ids"]))' "$golden")
  "$work/llama_logits" "$root/tests/data/fixtures/models/$name.gguf" "$ids" "$n_prompt" "$out/$name.logits.f32" q8_0
  echo "made $out/$name.logits.f32"
done

vocab_rel=fixtures/models/tiny-llama-f32.gguf
prompt=1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150
# name shape type layers
synth_cases=(
  "gpt-oss-test gpt-oss-test f32 2"
  "glm-4.5-air-mini glm-4.5-air-mini f32 4"
  "qwen3.5-0.8b qwen3.5-0.8b f32 4"
)
for c in "${synth_cases[@]}"; do
  read -r name shape type layers <<<"$c"
  wanted "$name-$type" || continue
  "$cohort" synth --shape "$shape" --type "$type" --pure --layers "$layers" --vocab "$root/tests/data/$vocab_rel" \
    -o "$work/$name.gguf"
  greedy=$("$work/llama_logits" "$work/$name.gguf" "$prompt" 16 "$out/$name-$type.logits.f32" 32 q8_0)
  printf '{"shape": "%s", "type": "%s", "layers": %s, "vocab": "%s", "prompt_ids": [%s], "greedy_ids": [%s]}\n' \
    "$shape" "$type" "$layers" "$vocab_rel" "$prompt" "$greedy" >"$out/$name-$type.json"
  echo "made $out/$name-$type.logits.f32"
done
