#!/usr/bin/env bash
# Streams that survive a lost node: a 3-node `cohort serve --cluster`, one node per network
# namespace (veth to one bridge, --peers only), the demo model placed tp over the 3 nodes.
#   1. Four streams (temperature 0, TOKENS tokens each, two through the coordinator and two
#      through the other survivor) run when a non-coordinator node is SIGKILLed: every stream
#      pauses, resumes on the re-placed instance and finishes with finish_reason "length" and
#      all TOKENS tokens, and its text after the resume equals an undisturbed run on the
#      surviving placement given the tokens streamed before it (resume_streams.py check).
#   2. A fresh cluster; four streams through the two non-coordinators when the coordinator's
#      node is SIGKILLed: the same.
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
EXTRA=(--link-latency-us 2000)
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
  OTHERS=()
  for i in $(seq 1 $N); do [ "$i" = "$COORD" ] || OTHERS+=("$i"); done
}

# streams_through_kill VICTIM URL...: four streams, VICTIM SIGKILLed once they flow, checked.
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
  echo "resume_netns_test: SIGKILLed n$victim with 4 streams running"
  wait "$py" || fail "the stream client failed"
  local survivor=${SURVIVOR}
  python3 "$HERE/resume_streams.py" check "$WORK" "$TOKENS" "$(api "$survivor")" || fail "streams across the loss of n$victim"
}

# --- 1. A non-coordinator dies.
place
VICTIM=${OTHERS[1]}
SURVIVOR=${OTHERS[0]}
echo "resume_netns_test: tp over 3 nodes, coordinator n$COORD; killing n$VICTIM"
streams_through_kill "$VICTIM" "$(api "$COORD")" "$(api "$COORD")" "$(api "$SURVIVOR")" "$(api "$SURVIVOR")"

# --- 2. The coordinator dies while the clients are connected to the other two nodes.
stop_all
place
SURVIVOR=${OTHERS[0]}
echo "resume_netns_test: fresh cluster, coordinator n$COORD; killing it"
streams_through_kill "$COORD" "$(api "${OTHERS[0]}")" "$(api "${OTHERS[1]}")" "$(api "${OTHERS[0]}")" "$(api "${OTHERS[1]}")"
echo "resume_netns_test: PASS"
