#!/usr/bin/env bash
# Makes llama.cpp's logits with a Q8_0 KV cache (-ctk q8_0 -ctv q8_0, flash attention on) for
# fixtures, fed as their goldens are (the prompt as one batch, then the greedy ids one at a
# time; the ids from tests/data/fixtures/golden/NAME.golden.json). A developer tool: run it once
# with a llama.cpp build and commit tests/data/kv-q8_0/NAME.logits.f32, which
# tests/model/kv_q8_0_test.cc compares cohort's --kv-type q8_0 logits with.
#   tools/make-kv-q8_0-goldens.sh [NAME...]   (LLAMA_CPP_DIR: src/ and build/ of llama.cpp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama="${LLAMA_CPP_DIR:-$root/build/llama.cpp}"
out="$root/tests/data/kv-q8_0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
"$root/tools/build-llama-logits.sh" "$llama" "$work/llama_logits"
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(tiny-llama-f32 tiny-llama-q4_0 tiny-qwen3-q8_0)
for name in "${names[@]}"; do
  golden="$root/tests/data/fixtures/golden/$name.golden.json"
  read -r ids n_prompt < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); ids=j["prompt_ids"]+j["greedy_ids"]; print(",".join(map(str,ids)), len(j["prompt_ids"]))' "$golden")
  "$work/llama_logits" "$root/tests/data/fixtures/models/$name.gguf" "$ids" "$n_prompt" "$out/$name.logits.f32" q8_0
  echo "made $out/$name.logits.f32"
done
