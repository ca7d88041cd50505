#!/usr/bin/env bash
# Each tensor-parallel rank holds its share: on a Llama-3.2-1B-shaped Q4_0 model cut to 2
# layers (the whole embedding, ~215 MB), every rank's peak resident memory (VmHWM, reported by
# `cohort -v logits`) must stay within 1.1 x model/N + 64 MB (the KV cache is negligible here).
#
#   rss_test.sh COHORT_BINARY
set -euo pipefail
cohort=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
model=$tmp/l1b-2layers.gguf
"$cohort" -t 1 synth --shape llama-3.2-1b --type q4_0 --pure --layers 2 -o "$model" 2>/dev/null
bytes=$(stat -c %s "$model")
for n in 2 3; do
  "$cohort" -v -t 1 logits -m "$model" --tokens 1,10,20,30 -o "$tmp/out.f32" --local-ranks "$n" \
    2>"$tmp/log.txt"
  limit=$(awk -v b="$bytes" -v n="$n" 'BEGIN {printf "%.1f", (1.1 * b / n + 64e6) / 1048576}')
  count=0
  while read -r mib; do
    count=$((count + 1))
    awk -v m="$mib" -v l="$limit" 'BEGIN {exit !(m <= l)}' ||
      { echo "FAIL: $n ranks: a rank peaked at $mib MiB > $limit MiB"; cat "$tmp/log.txt"; exit 1; }
  done < <(sed -n 's/.*peak resident \([0-9.]*\) MiB.*/\1/p' "$tmp/log.txt")
  [[ $count -eq $n ]] || { echo "FAIL: $count of $n ranks reported memory"; cat "$tmp/log.txt"; exit 1; }
  echo "$n ranks: every rank <= $limit MiB ($(sed -n 's/.*peak resident \([0-9.]*\) MiB.*/\1/p' "$tmp/log.txt" | tr '\n' ' '))"
done
