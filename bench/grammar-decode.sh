#!/usr/bin/env bash
# What grammar-constrained sampling adds to a decode step of the 1B shape on a 128K
# vocabulary: a random-weight llama-3.2-1b (cohort synth, Llama 3's tokenizer) served by
# `cohort serve`, the same chat generated plain and under grammars, in alternation (so machine
# load hits all alike). A decode step's time is (t(N tokens) - t(1 token)) / (N - 1), which
# leaves the prompt out. Grammars: a JSON schema with a free string (the drawn token is
# usually allowed: the check-first path), and lowercase letters only (the drawn token is
# usually refused: the vocabulary is masked, from the per-state mask cache after the first).
#
# Usage: bench/grammar-decode.sh [cohort build dir]   (default: build/release)
# Env:   THREADS (2)  ROUNDS (3)  TOKENS (48)  TYPE (q4_0)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir=${1:-$root/build/release}
threads=${THREADS:-2}
rounds=${ROUNDS:-3}
tokens=${TOKENS:-48}
type=${TYPE:-q4_0}
cohort="$bdir/bin/cohort"
model="$root/build/bench-models/l1b-$type.gguf"
mkdir -p "$root/build/bench-models"
[ -f "$model" ] || "$cohort" synth --shape llama-3.2-1b --type "$type" --vocab-dir "$root/build/external/vocab" -o "$model"

port=$((20000 + RANDOM % 20000))
"$cohort" -t "$threads" serve --host 127.0.0.1 --port "$port" -m "$model" --chat-template llama3 --ctx 512 \
  --parallel 1 2>/dev/null &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.5; done

# Seconds for one request of max_tokens $1 with extra fields $2.
run() {
  local body="{\"messages\":[{\"role\":\"user\",\"content\":\"Describe the weather.\"}],\"max_tokens\":$1,\"temperature\":0.8,\"seed\":3,\"ignore_eos\":true$2}"
  local start end
  start=$(date +%s.%N)
  curl -sf "http://127.0.0.1:$port/v1/chat/completions" -H 'content-type: application/json' -d "$body" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}

schema=',"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}}'
letters=',"grammar":"root ::= [a-z]+"'
declare -A sum
for name in plain schema letters; do sum[$name]=0; done
run 4 "" >/dev/null  # warm-up: the vocabulary tables are built on the first constrained request
run 4 "$schema" >/dev/null
for r in $(seq "$rounds"); do
  for name in plain schema letters; do
    case $name in plain) extra="" ;; schema) extra=$schema ;; letters) extra=$letters ;; esac
    t1=$(run 1 "$extra")
    tn=$(run "$tokens" "$extra")
    step=$(echo "($tn - $t1) / ($tokens - 1) * 1000" | bc -l)
    sum[$name]=$(echo "${sum[$name]} + $step" | bc -l)
    printf 'round %d %-7s %.2f ms per decode step\n' "$r" "$name" "$step"
  done
done
plain=$(echo "${sum[plain]} / $rounds" | bc -l)
for name in plain schema letters; do
  mean=$(echo "${sum[$name]} / $rounds" | bc -l)
  printf '%-7s mean %.2f ms per decode step (%+.1f%% vs plain)\n' "$name" "$mean" "$(echo "($mean / $plain - 1) * 100" | bc -l)"
done
