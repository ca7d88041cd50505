#!/usr/bin/env bash
# Streams that survive a lost node: a 3-node `cohort serve --cluster`, one node per network
# namespace (veth to one bridge, --peers only), the demo model placed tp over the 3 nodes.
#   1. Four streams (temperature 0, TOKENS tokens each, two through the coordinator and two
#      through the other survivor) run when a non-coordinator node is SIGKILLed: every stream
#      pauses, resumes on the re-placed instance and finishes with finish_reason "length" and
#      all TOKENS tokens, and its text after the resume equals an undisturbed run on the
#      surviving placement given the tokens streamed before it (resume_streams.py check).
#      Two plain (non-streamed) requests in flight beside them, one through each of those two
#      nodes, are answered 200 with all TOKENS tokens after a retry on the next placement, with
#      an undisturbed run's text.
#   2. The lost node comes back and POST /v1/instances/ID/rebalance moves the instance onto the
#      3 nodes again while four streams run: none is dropped (each finishes with "length" and
#      all TOKENS tokens), a stream broken by the move resumes as in 1, and the instance is
#      ready on 3 nodes afterwards.
#   3. A fresh cluster; four streams and two plain requests through the two non-coordinators
#      when the coordinator's node is SIGKILLed: the same as 1.
# The pause of each resume is printed. Generation is slowed with 2 ms of emulated link latency
# so a stream lasts long enough to be broken. Needs root; exits 77 (skipped) without it.
#
# usage: resume_netns_test.sh PATH/TO/cohort PATH/TO/model.gguf
set -euo pipefail

COHORT=$(readlink -f "$1")
MODEL=$(readlink -f "$2")
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$(id -u)" -ne 0 ]; then
  echo "resume_netns_test: needs root for network namespaces; skipped"
  exit 77
fi
[ -x "$COHORT" ] || { echo "resume_netns_test: $COHORT is not executable"; exit 1; }

TEST=resume_netns_test
N=3
TOKENS=${TOKENS:-100}
CTX=256
# shellcheck source=netns_cluster.sh
. "$HERE/netns_cluster.sh"
EXTRA=(--link-latency-us 2000 --parallel 8)  # 4 streams and 2 plain requests generate at once
export COHORT_API_KEY=$API_KEY  # for resume_streams.py
netns_setup

stop_all() {
  stop_nodes
  rm -rf "$WORK"/state-*
}

# A fresh 3-node instance; sets COORD and OTHERS (namespace indices).
place() {
  for i in $(seq 1 $N); do start_node "$i"; done
  wait_members 1 3
  load_instance 1 3
  COORD=$(coordinator_index)
  INSTANCE=$(json "$WORK/inst.json" "j['id']")
  OTHERS=()
  for i in $(seq 1 $N); do [ "$i" = "$COORD" ] || OTHERS+=("$i"); done
}

# streams_through_kill VICTIM URL...: a stream per URL (a plain request per plain:URL), VICTIM
# SIGKILLed once the streams flow, checked.
streams_through_kill() {
  local victim=$1
  shift
  rm -f "$WORK/flowing" "$WORK/results.json"
  python3 "$HERE/resume_streams.py" stream "$WORK" "$TOKENS" "$@" &
  local py=$!
  for _ in $(seq 1 300); do [ -e "$WORK/flowing" ] && break; sleep 0.02; done
  [ -e "$WORK/flowing" ] || { kill "$py" 2>/dev/null || true; fail "the streams did not start"; }
  kill -9 "${PIDS[$victim]}"
  wait "${PIDS[$victim]}" 2>/dev/null || true
  unset "PIDS[$victim]"
  echo "resume_netns_test: SIGKILLed n$victim with 4 streams and 2 plain requests running"
  wait "$py" || fail "the stream client failed"
  local survivor=${SURVIVOR}
  python3 "$HERE/resume_streams.py" check "$WORK" "$TOKENS" "$(api "$survivor")" || fail "streams across the loss of n$victim"
}

# --- 1. A non-coordinator dies.
place
VICTIM=${OTHERS[1]}
SURVIVOR=${OTHERS[0]}
echo "resume_netns_test: tp over 3 nodes, coordinator n$COORD; killing n$VICTIM"
streams_through_kill "$VICTIM" "$(api "$COORD")" "$(api "$COORD")" "$(api "$SURVIVOR")" "$(api "$SURVIVOR")" \
  "plain:$(api "$COORD")" "plain:$(api "$SURVIVOR")"

# --- 2. The node returns; a rebalance moves the instance back onto 3 nodes under four streams.
# Longer streams (MOVE_TOKENS), so that they still run when the new placement is ready: the
# time it is first seen ready on 3 nodes must fall before every stream's end.
# (The prompt, 3 tokens, and MOVE_TOKENS must fit the context of CTX tokens.)
MOVE_TOKENS=${MOVE_TOKENS:-240}
# ready_on_3 [EPOCH]: the instance, as the coordinator's node sees it, is ready on 3 ranks (in a
# placement after EPOCH).
ready_on_3() {
  api_get "$COORD" "/v1/instances/$INSTANCE" > "$WORK/inst.json" 2>/dev/null &&
    [ "$(json "$WORK/inst.json" "j.get('state') == 'ready' and len(j['ranks']) == 3 and j['epoch'] > ${1:-0}" 2>/dev/null)" = True ]
}
start_node "$VICTIM"
wait_members "$COORD" 3
# Whether the leader moves the instance back by itself when the node returns depends on how the
# returning node's view merges; the streams start once the instance is ready and has kept its
# placement for 2 s, and the rebalance below moves it under them either way.
settled=""
for _ in $(seq 1 30); do
  if api_get "$COORD" "/v1/instances/$INSTANCE" > "$WORK/inst.json" 2>/dev/null &&
     [ "$(json "$WORK/inst.json" "j.get('state')")" = ready ]; then
    epoch=$(json "$WORK/inst.json" "j['epoch']")
    sleep 2
    if api_get "$COORD" "/v1/instances/$INSTANCE" > "$WORK/inst.json" 2>/dev/null &&
       [ "$(json "$WORK/inst.json" "j.get('state') == 'ready' and j['epoch'] == $epoch")" = True ]; then
      settled=1
      break
    fi
  fi
  sleep 0.5
done
[ -n "$settled" ] || { cat "$WORK/inst.json"; fail "the instance did not settle after n$VICTIM returned"; }
rm -f "$WORK/flowing" "$WORK/results.json" "$WORK/moved_at"
python3 "$HERE/resume_streams.py" stream "$WORK" "$MOVE_TOKENS" "$(api "$COORD")" "$(api "$SURVIVOR")" "$(api "$COORD")" "$(api "$SURVIVOR")" &
py=$!
for _ in $(seq 1 300); do [ -e "$WORK/flowing" ] && break; sleep 0.02; done
[ -e "$WORK/flowing" ] || { kill "$py" 2>/dev/null || true; fail "the streams did not start"; }
api_get "$COORD" "/v1/instances/$INSTANCE" > "$WORK/inst.json"
before=$(json "$WORK/inst.json" "j['epoch']")
in_ns "$SURVIVOR" curl -s --max-time 5 -H "Authorization: Bearer $API_KEY" -X POST -d '' \
  "http://$SUBNET.$SURVIVOR:8080/v1/instances/$INSTANCE/rebalance" > "$WORK/rebalance.json"
[ "$(json "$WORK/rebalance.json" "j.get('rebalancing')" 2>/dev/null)" = True ] ||
  { cat "$WORK/rebalance.json"; fail "the rebalance was not accepted"; }
echo "resume_netns_test: n$VICTIM is back; rebalancing with 4 streams running"
for _ in $(seq 1 300); do
  if ready_on_3 "$before"; then date +%s.%N > "$WORK/moved_at"; break; fi
  sleep 0.1
done
[ -e "$WORK/moved_at" ] || { cat "$WORK/inst.json"; fail "the instance is not ready on 3 nodes after the rebalance"; }
wait "$py" || fail "the stream client failed"
python3 "$HERE/resume_streams.py" check-moved "$WORK" "$MOVE_TOKENS" "$(api "$COORD")" || fail "streams across the rebalance"

# --- 3. The coordinator dies while the clients are connected to the other two nodes.
stop_all
place
SURVIVOR=${OTHERS[0]}
echo "resume_netns_test: fresh cluster, coordinator n$COORD; killing it"
streams_through_kill "$COORD" "$(api "${OTHERS[0]}")" "$(api "${OTHERS[1]}")" "$(api "${OTHERS[0]}")" "$(api "${OTHERS[1]}")" \
  "plain:$(api "${OTHERS[0]}")" "plain:$(api "${OTHERS[1]}")"
echo "resume_netns_test: PASS"
