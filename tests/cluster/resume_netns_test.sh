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

N=3
TOKENS=${TOKENS:-100}
TAG=$$
SUBNET="10.233.$((TAG % 200 + 20))"
BR="crbr$TAG"
WORK=$(mktemp -d /tmp/cohort-resume.XXXXXX)
declare -A PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for i in $(seq 1 $N); do ip netns del "cr$TAG-$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "resume_netns_test: FAIL: $*"
  cp "$WORK/results.json" /tmp/resume-results.json 2>/dev/null || true
  for f in "$WORK"/*.log; do echo "--- $f"; tail -25 "$f"; done
  exit 1
}

ip link add "$BR" type bridge
ip addr add "$SUBNET.254/24" dev "$BR"
ip link set "$BR" up
for i in $(seq 1 $N); do
  ns="cr$TAG-$i"
  ip netns add "$ns"
  ip link add "crv$TAG-$i" type veth peer name "crp$TAG-$i"
  ip link set "crp$TAG-$i" netns "$ns"
  ip link set "crv$TAG-$i" master "$BR" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$SUBNET.$i/24" dev "crp$TAG-$i"
  ip netns exec "$ns" ip link set "crp$TAG-$i" up
done

PEERS=$(for k in $(seq 1 $N); do printf '%s' "$SUBNET.$k:7946,"; done)
start_node() {
  local i=$1
  ip netns exec "cr$TAG-$i" "$COHORT" -v -t 1 serve --cluster --listen "$SUBNET.$i:7946" \
    --host "$SUBNET.$i" --port 8080 --peers "${PEERS%,}" --no-multicast --secret "resume test" \
    --state-dir "$WORK/state-$i" --models-dir "$(dirname "$MODEL")" --name "n$i" --no-benchmarks --heartbeat-ms 250 --suspect-ms 1000 \
    --dead-ms 2500 --comm-timeout-ms 2500 --link-latency-us 2000 -c 256 \
    >> "$WORK/n$i.log" 2>&1 &
  PIDS[$i]=$!
}
stop_all() {
  for i in "${!PIDS[@]}"; do kill -9 "${PIDS[$i]}" 2>/dev/null || true; wait "${PIDS[$i]}" 2>/dev/null || true; done
  PIDS=()
  rm -rf "$WORK"/state-*
}

api() { echo "http://$SUBNET.$1:8080"; }
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

wait_members() {  # wait_members NODE COUNT: NODE sees COUNT members alive
  for _ in $(seq 1 100); do
    if curl -s --max-time 2 "$(api "$1")/v1/cluster" > "$WORK/c.json" 2>/dev/null &&
       [ "$(json "$WORK/c.json" "sum(m['state'] == 'alive' for m in j['members'])")" = "$2" ]; then
      return 0
    fi
    sleep 0.2
  done
  fail "node $1 does not see $2 members alive"
}

# A fresh 3-node instance; sets COORD and OTHERS (namespace indices).
place() {
  for i in $(seq 1 $N); do start_node "$i"; done
  wait_members 1 3
  curl -s --max-time 60 "$(api 1)/v1/instances" \
    -d "{\"model\": \"$MODEL\", \"nodes\": 3, \"layout\": \"tp\", \"wait_s\": 50}" > "$WORK/inst.json"
  [ "$(json "$WORK/inst.json" "j.get('state')")" = ready ] || { cat "$WORK/inst.json"; fail "instance not ready"; }
  COORD=$(json "$WORK/inst.json" "[r['name'] for r in j['ranks'] if r['node'] == j['coordinator']][0][1:]")
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
