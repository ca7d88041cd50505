#!/usr/bin/env bash
# Makes tiny-llama fixtures in the quantization types the README's set lacks (the i-quants:
# IQ4_NL, IQ4_XS, ...) with their llama.cpp goldens, in the fixtures' own layout
# (tests/data/fixtures/README.md): llama-quantize --pure from tiny-llama-f32, then
# tools/llama_logits with the golden settings (1 thread, F32 KV cache, flash attention off,
# weight repacking on): the 16-id prompt as one batch, then 32 greedy single-token steps.
# A developer tool: run it once and commit what it writes; the files are never hand-edited.
#   tools/make-quant-fixtures.sh [TYPE ...]        (default: iq4_nl iq4_xs iq2_xxs)
# TYPE_imat (iq4_xs_imat, ...): TYPE quantized against the importance matrix below, every matrix
# in TYPE (ggml's quantizer takes no matrix where llama-imatrix measured none).
# LLAMA_CPP_DIR: a llama.cpp tree in bench/build-llamacpp.sh's layout (src/ and build/); the
# fixtures' goldens came from an AVX-512 build, so the default is build/llama.cpp-avx512's.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${LLAMA_CPP_DIR:-}" ]; then
  llama=$LLAMA_CPP_DIR
else
  llama="$work/llama"
  mkdir -p "$llama"
  ln -s "$root/build/llama.cpp/src" "$llama/src"
  ln -s "$root/build/llama.cpp-avx512" "$llama/build"
fi
fixtures="$root/tests/data/fixtures"
f32="$fixtures/models/tiny-llama-f32.gguf"
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(iq4_nl iq4_xs iq2_xxs)

"$root/tools/build-llama-logits.sh" "$llama" "$work/llama_logits"
# llama-quantize and llama-imatrix are not among the binaries bench/build-llamacpp.sh builds:
# link them here from their sources and the build's libraries.
b="$llama/build"
link_tool() {  # OUT SOURCE...
  local out=$1
  shift
  g++ -std=c++17 -O1 -fopenmp -I"$llama/src/include" -I"$llama/src/ggml/include" -I"$llama/src/common" \
    -I"$llama/src/vendor" "$@" \
    "$b/common/libllama-common.a" "$b/common/libllama-common-base.a" "$b/src/libllama.a" \
    "$b/ggml/src/libggml.a" "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/ggml-rpc/libggml-rpc.a" \
    "$b/ggml/src/libggml-base.a" $(ls "$b"/vendor/cpp-httplib/libcpp-httplib.a 2>/dev/null) -lssl -lcrypto -lpthread \
    $(pkg-config --exists libibverbs && echo -libverbs) -o "$out"
}
link_tool "$work/llama-quantize" "$llama/src/tools/quantize/main.cpp" "$llama/src/tools/quantize/quantize.cpp"

# The fixtures' hash lists, the line of fixtures/REL replaced.
record_sum() {
  local sums
  sums="$fixtures/$(dirname "$1")/SHA256SUMS"
  grep -v "  $(basename "$1")\$" "$sums" >"$work/sums" || true
  (cd "$fixtures/$(dirname "$1")" && sha256sum "$(basename "$1")") >>"$work/sums"
  cp "$work/sums" "$sums"
}

# The 2- and 3-bit i-quants need an importance matrix (llama-quantize refuses them without):
# llama-imatrix's, of tiny-llama-f32 over a fixed text (llama.cpp's LICENSE at the bundle's
# commit), one thread, 64-token chunks. Written once beside the fixtures and reused, so a rerun
# for another type quantizes against the same matrix.
imatrix="$fixtures/models/tiny-llama-f32.imatrix.gguf"
needs_imatrix() { case $1 in iq2_xxs|iq2_xs|iq2_s|iq3_xxs|iq1_s|iq1_m) return 0 ;; *) return 1 ;; esac; }
make_imatrix() {
  [ -f "$imatrix" ] && return 0
  link_tool "$work/llama-imatrix" "$llama/src/tools/imatrix/imatrix.cpp"
  "$work/llama-imatrix" -m "$f32" -f "$llama/src/LICENSE" -o "$imatrix" -c 64 -t 1 --no-ppl \
    >"$work/imatrix.log" 2>&1 || { cat "$work/imatrix.log"; exit 1; }
  record_sum models/tiny-llama-f32.imatrix.gguf
}

# llama-quantize's name for the file type whose matrices are TYPE: its IQ2_S mixture is made of
# IQ2_XS matrices, and IQ2_M is the one of IQ2_S matrices (llama_ftype_get_default_type).
quantize_type() { case ${1%_imat} in iq2_s) echo IQ2_M ;; *) echo "${1%_imat}" | tr a-z A-Z ;; esac; }

prompt=1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150
n_vocab=512
row_bytes=$((n_vocab * 4))
commit=$(git -C "$llama/src" rev-parse HEAD 2>/dev/null || echo unknown)
for t in "${types[@]}"; do
  name="tiny-llama-$t"
  model="$fixtures/models/$name.gguf"
  imatrix_args=()
  made_by_imatrix=""
  if needs_imatrix "$t"; then
    make_imatrix
    # llama-imatrix measures the matrices a forward pass multiplies, not token_embd (rows are
    # looked up) nor, by default, output.weight, and ggml's quantizer asserts on a grid type
    # without a matrix: those two take the types llama-quantize's own 2-bit mixture gives them.
    # (IQ3_XXS's mixture puts token_embd at IQ3_S, which needs no matrix.)
    embd=q2_k
    [ "$t" = iq3_xxs ] && embd=iq3_s
    imatrix_args=(--imatrix "$imatrix" --token-embedding-type $embd --output-tensor-type q5_k)
    made_by_imatrix=" --imatrix tiny-llama-f32.imatrix.gguf --token-embedding-type $embd --output-tensor-type q5_k"
  elif [ "${t%_imat}" != "$t" ]; then
    make_imatrix
    imatrix_args=(--imatrix "$imatrix")
    made_by_imatrix=" --imatrix tiny-llama-f32.imatrix.gguf"
  fi
  "$work/llama-quantize" --pure "${imatrix_args[@]}" "$f32" "$model" "$(quantize_type "$t")" >"$work/quantize.log" 2>&1 ||
    { cat "$work/quantize.log"; exit 1; }
  greedy=$("$work/llama_logits" "$model" "$prompt" 16 "$work/all.f32" 32)
  head -c $((16 * row_bytes)) "$work/all.f32" >"$fixtures/golden/$name.logits.f32"
  tail -c $((32 * row_bytes)) "$work/all.f32" >"$fixtures/golden/$name.gen_logits.f32"
  # llama.cpp's own rows for the golden test's uneven feeding (3 ids, then 7 at a time) of the
  # prompt and greedy ids: batches of < 8 take the i-quants' vec-dot, not the goldens' panel GEMM.
  "$work/llama_logits" "$model" "$prompt,$greedy" 3 "$fixtures/golden/$name.chunks_3_7.f32" chunk=7 >/dev/null
  cat >"$fixtures/golden/$name.golden.json" <<EOF
{
  "model_file": "$name.gguf",
  "model_sha256": "$(sha256sum "$model" | cut -d' ' -f1)",
  "made_by": "tools/make-quant-fixtures.sh: llama-quantize --pure$made_by_imatrix tiny-llama-f32.gguf $(quantize_type "$t"), then tools/llama_logits",
  "llama_cpp_commit": "$commit",
  "llama_cpp_build": "$(readlink -f "$b")",
  "settings": {"backend": "CPU", "n_threads": 1, "n_ctx": 256, "type_k": "f32", "type_v": "f32", "flash_attn": false, "weight_repack": true, "prompt_decode": "one batch"},
  "n_vocab": $n_vocab,
  "prompt_ids": [${prompt//,/, }],
  "n_prompt": 16,
  "logits_file": "$name.logits.f32",
  "logits_sha256": "$(sha256sum "$fixtures/golden/$name.logits.f32" | cut -d' ' -f1)",
  "greedy_ids": [${greedy//,/, }],
  "gen_logits_file": "$name.gen_logits.f32",
  "gen_logits_sha256": "$(sha256sum "$fixtures/golden/$name.gen_logits.f32" | cut -d' ' -f1)",
  "chunks_3_7_file": "$name.chunks_3_7.f32",
  "chunks_3_7_sha256": "$(sha256sum "$fixtures/golden/$name.chunks_3_7.f32" | cut -d' ' -f1)"
}
EOF
  for f in "models/$name.gguf" "golden/$name.logits.f32" "golden/$name.gen_logits.f32" "golden/$name.chunks_3_7.f32"; do
    record_sum "$f"
  done
  echo "made $model and its goldens"
done
