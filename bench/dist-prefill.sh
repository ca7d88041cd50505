#!/usr/bin/env bash
# Prompt speed on a cluster (issue 25, acceptance 2): a long prompt (default 2,048 tokens) on
# the Llama-3.2-1B-shaped Q4_0 model, 1 process x 1 thread against pipeline and tensor
# parallelism over 2 processes x 1 thread each, in the same run: the configurations alternate
# so that background load hits them alike; medians and the median per-round ratios are
# reported (targets: pp >= 1.5x, tp >= 1.7x of one rank).
#
#   bench/dist-prefill.sh [-m MODEL] [-p PROMPT_TOKENS] [-r REPS] [-b COHORT_BINARY] [-t tcp|shm]
#
# DIST_TP_KEEP_PRIORITY=1 leaves the scheduling priority alone (see bench/dist-tp.sh).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cohort="$root/build/release/bin/cohort"
model=/tmp/llama1b-q4_0.gguf
n_prompt=2048
reps=3
transport=tcp
while getopts "m:p:r:b:t:" opt; do
  case $opt in
    m) model=$OPTARG ;;
    p) n_prompt=$OPTARG ;;
    r) reps=$OPTARG ;;
    b) cohort=$OPTARG ;;
    t) transport=$OPTARG ;;
    *) exit 2 ;;
  esac
done
# As bench/dist-tp.sh: a session of our own, its autogroup raised (root), so that other
# sessions' builds do not take the second core from a two-rank run.
if [[ -z ${DIST_TP_KEEP_PRIORITY:-} ]]; then
  if [[ -z ${DIST_PREFILL_SESSION:-} && -w /proc/self/autogroup ]]; then
    DIST_PREFILL_SESSION=1 exec setsid -w bash "$0" "$@"
  fi
  [[ -w /proc/self/autogroup ]] && { echo -20 >/proc/self/autogroup || true; }
fi
[[ -x $cohort ]] || { echo "no cohort binary at $cohort (build the cohort target)" >&2; exit 1; }
[[ -f $model ]] || "$cohort" synth --shape llama-3.2-1b --type q4_0 --pure -o "$model"

# "the cat sat on a mat" is 6 tokens of Llama 3's vocabulary; with BOS, n_prompt - 1 of them
# give about n_prompt tokens (the [stats] line says how many exactly).
prompt=$(python3 -c "import sys; n = int(sys.argv[1]); print(' '.join(['the cat sat on a mat'] * max(1, (n - 1) // 6)))" "$n_prompt")
ctx=$((n_prompt + 256))

# Prompt tok/s from the [stats] line of `cohort -t 1 run ... EXTRA...`.
prompt_speed() {
  "$cohort" -t 1 run -m "$model" -p "$prompt" -n 1 --temp 0 -c "$ctx" "$@" 2>&1 |
    sed -n 's/.*prompt \([0-9]*\) tokens \([0-9.]*\) tok\/s.*/\2/p'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

declare -a one pp tp rpp rtp
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg), model $model, ~$n_prompt prompt tokens, $transport, $reps reps"
for ((i = 0; i < reps; i++)); do
  one+=("$(prompt_speed)")
  pp+=("$(prompt_speed --local-ranks 2 --layout pp --transport "$transport")")
  tp+=("$(prompt_speed --local-ranks 2 --layout tp --transport "$transport")")
  rpp+=("$(awk -v a="${pp[-1]}" -v b="${one[-1]}" 'BEGIN {print a / b}')")
  rtp+=("$(awk -v a="${tp[-1]}" -v b="${one[-1]}" 'BEGIN {print a / b}')")
  echo "rep $i: 1x1 ${one[-1]}  pp 2x1 ${pp[-1]}  tp 2x1 ${tp[-1]} prompt tok/s (load $(cut -d' ' -f1 /proc/loadavg))"
done
o=$(printf '%s\n' "${one[@]}" | median)
p=$(printf '%s\n' "${pp[@]}" | median)
t=$(printf '%s\n' "${tp[@]}" | median)
a=$(printf '%s\n' "${rpp[@]}" | median)
b=$(printf '%s\n' "${rtp[@]}" | median)
echo "median prompt tok/s: 1 process x 1 thread $o | 2 processes x 1 thread: pp $p, tp $t"
awk -v o="$o" -v p="$p" -v t="$t" -v a="$a" -v b="$b" 'BEGIN {printf "pp/one %.2fx (median per-rep %.2fx, target >= 1.5x); tp/one %.2fx (median per-rep %.2fx, target >= 1.7x)\n", p / o, a, t / o, b}'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
