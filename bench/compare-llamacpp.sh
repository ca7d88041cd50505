#!/usr/bin/env bash
# cohort vs llama.cpp on the same synthetic models, threads and machine: builds llama.cpp from
# node-llama-cpp@3.22.1's git bundle into build/llama.cpp (bench/build-llamacpp.sh), makes the
# benchmark models with `cohort synth`, measures STREAM-style read bandwidth (every round), runs
# `cohort bench` and `llama-bench` in alternation (one repetition each per round, so machine
# load hits both alike) and prints one table: medians, ratios, fraction of the bandwidth limit.
# The bandwidth is read again between and after the two runs of each round; a second table
# takes only the rounds in which it held still, grouped by its level, for machines (VMs) whose
# memory speed changes by the minute.
# ISA=avx2 compares the AVX2 paths of both on any x86 machine (one with AVX-512 too): cohort
# runs with COHORT_SIMD=avx2, llama.cpp is built for AVX2 + FMA + F16C only into
# build/llama.cpp-avx2 (bench/build-llamacpp.sh JOBS avx2). The table says which ISA each side
# ran: cohort's from its bench JSON ("simd"), llama.cpp's from its CPU backend's features
# (llama-completion's system_info line).
#
# Usage: bench/compare-llamacpp.sh [cohort build dir]      (default: build/perf)
# Env:   THREADS (2)  ROUNDS (3)  PP (512)  TG (128)  MODELS ("l1b-q4_0 l1b-q8_0 ...")
#        ISA (native | avx2 | avx512)  SKIP_PP=1 measures tg only (faster on a busy machine).
set -euo pipefail
# As bench/dist-tp.sh: a session of our own, its autogroup raised (root), so that other
# sessions' work (a build) takes little of the CPU from the engines being timed.
# COMPARE_KEEP_PRIORITY=1 leaves the priority alone.
if [[ -z ${COMPARE_KEEP_PRIORITY:-} ]]; then
  if [[ -z ${COMPARE_SESSION:-} && -w /proc/self/autogroup ]]; then
    COMPARE_SESSION=1 exec setsid -w bash "$0" "$@"
  fi
  [[ -w /proc/self/autogroup ]] && { echo -20 >/proc/self/autogroup || true; }
fi
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$root/build/perf}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
pp=${PP:-512}
tg=${TG:-128}
[ "${SKIP_PP:-0}" = 1 ] && pp=0
models_dir="$root/build/bench-models"
out="$root/build/bench-results"
cohort="$bdir/bin/cohort"
isa=${ISA:-native}
case "$isa" in
  native) llama_bin="$root/build/llama.cpp/build/bin" ;;
  avx2)
    llama_bin="$root/build/llama.cpp-avx2/bin"
    export COHORT_SIMD=avx2  # cohort refuses to run if this CPU has no AVX2
    ;;
  # AVX-512 without AMX on both sides (cohort at its best level), for VMs that list AMX the
  # guest cannot run (build-llamacpp.sh avx512).
  avx512) llama_bin="$root/build/llama.cpp-avx512/bin" ;;
  *) echo "compare-llamacpp: ISA must be native, avx2 or avx512, not '$isa'" >&2; exit 2 ;;
esac
mkdir -p "$models_dir" "$out" "$root/build/bench"

# name shape type
# (the i-quants and MXFP4 --pure: every matrix in the type, as issue 21's speed rows want them)
all_models="l1b-q4_0:llama-3.2-1b:q4_0 l1b-q8_0:llama-3.2-1b:q8_0 l1b-q4_k_m:llama-3.2-1b:q4_k_m
q17b-q4_k_m:qwen3-1.7b:q4_k_m moe-q4_k_m:qwen3-30b-a3b-mini:q4_k_m
l1b-iq4_xs:llama-3.2-1b:iq4_xs:--pure l1b-iq2_xxs:llama-3.2-1b:iq2_xxs:--pure
l1b-mxfp4:llama-3.2-1b:mxfp4_all:--pure"
want=${MODELS:-"l1b-q4_0 l1b-q8_0 l1b-q4_k_m q17b-q4_k_m moe-q4_k_m"}

[ -x "$llama_bin/llama-bench" ] || "$root/bench/build-llamacpp.sh" 2 "$isa"
[ -x "$cohort" ] || cmake --build "$bdir" -j2 --target cohort

c++ -O2 -std=c++20 -pthread "$root/bench/stream_read.cc" -o "$root/build/bench/stream_read"
# This VM's read bandwidth swings between about 30 and 60 GB/s within minutes (other guests on
# the host), so it is measured in every round, just before that round's runs, and each
# round's generation rates are set against the bandwidth of their own round.
read_bw() { "$root/build/bench/stream_read" "$threads" 512 4 2>/dev/null; }

# The ISA llama.cpp's CPU backend was built for, from the features llama-completion lists
# ("CPU : SSE3 = 1 | AVX = 1 | AVX2 = 1 | ..."): a level named as cohort names its levels,
# then the features.
llama_isa() {
  local info features level
  info=$("$llama_bin/llama-completion" -m "$1" -p hi -n 1 -no-cnv --no-warmup -t "$threads" </dev/null 2>&1 |
         grep -m1 'system_info' || true)
  features=$(sed -n 's/.*CPU : //p' <<<"$info" | tr '|' '\n' | awk -F' = ' '$2 + 0 == 1 {gsub(/ /, "", $1); printf "%s ", $1}')
  case " $features " in
    *" AVX512 "*) level=avx512 ;;
    *" AVX_VNNI "*) level=avx_vnni ;;
    *" AVX2 "*) level=avx2 ;;
    *" DOTPROD "*) level=neon ;;
    *) level=unknown ;;
  esac
  echo "$level (${features% })"
}

median() { tr ',' '\n' | sort -g | awk '{v[NR]=$1} END {if (NR==0) print 0; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

rows=()
loads=()
rounds_file="$out/rounds.txt"
: >"$rounds_file"
bw_all=()
cohort_isa=() llama_isas=()
for entry in $all_models; do
  IFS=: read -r name shape type synth_flags <<<"$entry"
  case " $want " in *" $name "*) ;; *) continue ;; esac
  file="$models_dir/$name.gguf"
  [ -f "$file" ] || "$cohort" -t "$threads" synth --shape "$shape" --type "$type" ${synth_flags:-} -o "$file" >&2
  cat "$file" >/dev/null  # into the page cache before either engine maps it
  [ ${#llama_isas[@]} -gt 0 ] || llama_isas+=("$(llama_isa "$file")")
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  c_pp=() c_tg=() l_pp=() l_tg=() bws=() c_frac=() l_frac=() bytes=0 rss=0 limit=0
  for ((r = 0; r < rounds; ++r)); do
    bws+=("$(read_bw)")
    echo "[$name] round $((r + 1))/$rounds, read bandwidth ${bws[-1]} GB/s" >&2
    bw_before=${bws[-1]}
    cj=$("$cohort" bench -m "$file" -p "$pp" -n "$tg" -t "$threads" -r 1 --json)
    echo "$cj" >>"$out/$name.cohort.jsonl"
    c_pp+=("$(jq -r .pp_tokens_per_s <<<"$cj")")
    c_tg+=("$(jq -r .tg_tokens_per_s <<<"$cj")")
    cohort_isa+=("$(jq -r '.simd // "?"' <<<"$cj")")
    bytes=$(jq -r .weight_bytes_per_token <<<"$cj")
    rss=$(jq -r '.peak_rss_bytes / (.file_bytes + .kv_bytes)' <<<"$cj")
    bw_between=$(read_bw)
    lj=$("$llama_bin/llama-bench" -m "$file" -p "$pp" -n "$tg" -t "$threads" -r 1 -o json 2>/dev/null)
    bw_after=$(read_bw)
    echo "$lj" | jq -c . >>"$out/$name.llama.jsonl"
    l_pp+=("$(jq -r '[.[] | select(.n_prompt > 0) | .avg_ts][0] // 0' <<<"$lj")")
    l_tg+=("$(jq -r '[.[] | select(.n_gen > 0) | .avg_ts][0] // 0' <<<"$lj")")
    # Fractions of this round's limit (bandwidth / bytes per token).
    c_frac+=("$(awk -v t="${c_tg[-1]}" -v b="$bytes" -v bw="${bws[-1]}" 'BEGIN {print 100 * t * b / (bw * 1e9)}')")
    l_frac+=("$(awk -v t="${l_tg[-1]}" -v b="$bytes" -v bw="${bws[-1]}" 'BEGIN {print 100 * t * b / (bw * 1e9)}')")
    # The round as a whole: its three bandwidth readings (before, between, after the two
    # engines), for the table of rounds in which the bandwidth held still.
    echo "$name $bw_before $bw_between $bw_after ${c_tg[-1]} ${l_tg[-1]} $bytes" >>"$rounds_file"
  done
  echo "[$name] load average $load_before before, $(cut -d' ' -f1 /proc/loadavg) after" >&2
  loads+=("$name: $load_before -> $(cut -d' ' -f1 /proc/loadavg)")
  cpp=$(IFS=,; echo "${c_pp[*]}" | median); ctg=$(IFS=,; echo "${c_tg[*]}" | median)
  lpp=$(IFS=,; echo "${l_pp[*]}" | median); ltg=$(IFS=,; echo "${l_tg[*]}" | median)
  bw=$(IFS=,; echo "${bws[*]}" | median)
  cfrac=$(IFS=,; echo "${c_frac[*]}" | median); lfrac=$(IFS=,; echo "${l_frac[*]}" | median)
  bw_all+=("${bws[@]}")
  rows+=("$(awk -v n="$name" -v cpp="$cpp" -v lpp="$lpp" -v ctg="$ctg" -v ltg="$ltg" \
             -v b="$bytes" -v bw="$bw" -v rss="$rss" -v cf="$cfrac" -v lf="$lfrac" 'BEGIN {
    lim = bw * 1e9 / b;
    printf "| %-12s | %8.2f | %8.2f | %5.2fx | %7.2f | %7.2f | %5.2fx | %5.1f | %6.1f | %5.0f%% | %5.0f%% | %5.1f | %5.3f |",
      n, cpp, lpp, (lpp > 0 ? cpp / lpp : 0), ctg, ltg, (ltg > 0 ? ctg / ltg : 0), bw, lim,
      cf, lf, b / 1048576, rss }')")
done

echo
echo "cohort vs llama.cpp (llama-bench), $threads threads, medians of $rounds alternating rounds;"
echo "ISA=$isa: cohort ran at $(printf '%s\n' "${cohort_isa[@]}" | sort -u | paste -sd, -), llama.cpp's CPU backend is ${llama_isas[0]:-?}"
echo "read bandwidth (bench/stream_read) measured before every round: $(printf '%s ' "${bw_all[@]}")GB/s;"
echo "limit = the model's median bandwidth / weight bytes per token; %lim = median over rounds of"
echo "each round's tg against its own round's bandwidth"
echo "| model        | pp$pp cohort | llama | ratio | tg$tg cohort | llama | ratio | GB/s | limit t/s | cohort %lim | llama %lim | MiB/tok | RSS/(file+KV) |"
echo "|--------------|----------|----------|--------|---------|---------|--------|-------|--------|--------|--------|-------|-------|"
printf '%s\n' "${rows[@]}"
echo
echo "1-minute load average (before -> after each model's rounds): ${loads[*]}"
# A machine whose bandwidth changes between (or during) the engines' runs compares them under
# different conditions. Steady rounds: the three readings of the round within 15% of each
# other. They are grouped by bandwidth (lower: under 3/4 of the highest steady round's), and
# each group's generation ratio is the median of its rounds' own ratios.
echo
echo "generation in steady rounds (bandwidth before, between and after the two runs within 15%),"
echo "by bandwidth level (top: within 3/4 of the run's highest steady round); ratio = median of the rounds' own cohort/llama ratios:"
echo "| model        | level | rounds | GB/s | tg ratio | cohort %lim | llama %lim |"
echo "|--------------|-------|--------|------|----------|-------------|------------|"
# Steady rounds as "model level GB/s ratio cohort%lim llama%lim", in the rounds' order.
steady=$(awk '
  {
    lo = $2; hi = $2
    for (i = 3; i <= 4; ++i) { if ($i < lo) lo = $i; if ($i > hi) hi = $i }
    if (lo <= 0 || hi / lo > 1.15 || $6 <= 0) next
    bw = ($2 + $3 + $4) / 3
    row[++n] = $1 " " bw " " $5 / $6 " " 100 * $5 * $7 / (bw * 1e9) " " 100 * $6 * $7 / (bw * 1e9)
    bws[n] = bw
    if (bw > top) top = bw
  }
  END {
    for (i = 1; i <= n; ++i) {
      split(row[i], f, " ")
      print f[1], (bws[i] >= 0.75 * top ? "top" : "lower"), f[2], f[3], f[4], f[5]
    }
  }' "$rounds_file")
for name in $(awk '{print $1}' <<<"$steady" | uniq); do
  for level in top lower; do
    group=$(awk -v n="$name" -v l="$level" '$1 == n && $2 == l' <<<"$steady")
    [ -n "$group" ] || continue
    col() { awk -v c="$1" '{print $c}' <<<"$group" | median; }
    printf '| %-12s | %-5s | %6d | %4.1f | %7.2fx | %10.0f%% | %9.0f%% |\n' "$name" "$level" \
      "$(wc -l <<<"$group")" "$(col 3)" "$(col 4)" "$(col 5)" "$(col 6)"
  done
done
