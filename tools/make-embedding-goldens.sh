#!/usr/bin/env bash
# Makes llama.cpp's pooled embeddings (mean, cls and last; not normalized) of the fixtures'
# golden prompts, with the fixtures' settings (tools/llama_embed.cc). A developer tool: run it
# once with a llama.cpp build and commit what it writes under tests/data/embeddings/, which
# tests/engine/embedding_test.cc and tests/server/embeddings.test.mjs compare cohort's with.
#   tools/make-embedding-goldens.sh   (LLAMA_CPP_DIR: src/ and build/ of llama.cpp)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llama="${LLAMA_CPP_DIR:-$root/build/llama.cpp}"
out="$root/tests/data/embeddings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
"$root/tools/build-llama-logits.sh" "$llama" "$work/llama_embed" "$root/tools/llama_embed.cc"
for name in tiny-llama-f32 tiny-qwen3-f32 tiny-qwen3-q8_0; do
  golden="$root/tests/data/fixtures/golden/$name.golden.json"
  ids=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompt_ids"])))' "$golden")
  for pooling in mean cls last; do
    "$work/llama_embed" "$root/tests/data/fixtures/models/$name.gguf" "$ids" "$pooling" "$out/$name.$pooling.f32"
    echo "made $out/$name.$pooling.f32"
  done
done
