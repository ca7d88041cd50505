#!/usr/bin/env bash
# Model instances on a 3-node `cohort serve --cluster`, one node per network namespace (veth
# to one bridge, --peers only):
#   1. POST /v1/instances loads the demo model across the 3 nodes; a completion through a
#      node that is not the coordinator gives the model's text.
#   2. Kill: while a stream runs through a non-coordinator node, the other non-coordinator is
#      SIGKILLed: the stream pauses and resumes on the survivors, finishing whole (no error
#      event); a new request succeeds (re-placed on the survivors); the node restarts,
#      rejoins, and a rebalance spreads the model over 3 nodes again.
#   3. Link cut: the same with that node's veth set down (and up again).
#   3b. Coordinator cut: with a stream through one other node and a plain (non-streaming)
#      request through the third, the coordinator's veth is set down: the forwarding nodes
#      give up on it once the membership marks it suspect: the plain request is tried again
#      on the survivors' placement and answered 200 with all its tokens (X-Cohort-Retries >= 1),
#      the stream resumes on the survivors under a new coordinator and finishes whole;
#      the link comes back, the node rejoins, and a rebalance spreads the model over 3 again.
#   4. --max-memory so the model fits on no single node (nor on two): it loads on 3 nodes,
#      each holding <= 40% of the file's bytes, and generates; with a node gone, the instance
#      says why it cannot be placed.
#   5. Only the coordinator has the file (the others' view of its directory is an empty
#      tmpfs): the other two are streamed their shares, and the model generates the same
#      text as in 1.
# Takes 35–80 s by the load. Generation is slowed with 2 ms of emulated link
# latency, so a stream lasts long enough to be cut. Needs root; exits 77 (skipped) without
# it. Cleans up on any exit.
#
# usage: instance_netns_test.sh PATH/TO/cohort PATH/TO/model.gguf
set -euo pipefail

COHORT=$(readlink -f "$1")
MODEL=$(readlink -f "$2")
if [ "$(id -u)" -ne 0 ]; then
  echo "instance_netns_test: needs root for network namespaces; skipped"
  exit 77
fi
[ -x "$COHORT" ] || { echo "instance_netns_test: $COHORT is not executable"; exit 1; }

TEST=instance_netns_test
N=3
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=netns_cluster.sh
. "$HERE/netns_cluster.sh"
LATENCY=(--link-latency-us 2000)
EXTRA=("${LATENCY[@]}")  # more `serve` options for every node (scenario 4 adds a budget)
AUTH="Authorization: Bearer $API_KEY"
netns_setup

stop_all() { stop_nodes; }

# instance_ready NODE RANKS: NODE reports the instance ready on RANKS nodes (left in inst.json).
instance_ready() {
  curl -s -H "$AUTH" --max-time 2 "$(api "$1")/v1/instances/stories260K" > "$WORK/inst.json" 2>/dev/null &&
    [ "$(json "$WORK/inst.json" "j.get('state') == 'ready' and len(j['ranks']) == $2")" = True ]
}

# wait_instance NODE RANKS SECONDS: the instance is ready on RANKS nodes; leaves it in inst.json.
wait_instance() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    instance_ready "$1" "$2" && return 0
    sleep 0.2
  done
  cat "$WORK/inst.json" 2>/dev/null || true
  fail "instance not ready on $2 nodes within $3 s (via node $1)"
}

# rebalance NODE COUNT TIMEOUT: asks NODE to re-place the instance until it is ready on COUNT
# nodes. A rebalance posted just after a partition heals can be lost: the agreed state is
# leader-written, and the two sides' states are merged by (term, version), so a change made on
# the losing side is dropped (docs/CLUSTER.md, limits). The request is repeated, as a user
# would, when the instance has not spread after a few seconds.
rebalance() {
  local deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    curl -s -H "$AUTH" --max-time 5 -X POST -d '' "$(api "$1")/v1/instances/stories260K/rebalance" > /dev/null || true
    local until=$((SECONDS + 8))
    while [ $SECONDS -lt $until ]; do
      instance_ready "$1" "$2" && return 0
      sleep 0.2
    done
  done
  cat "$WORK/inst.json" 2>/dev/null || true
  fail "instance not rebalanced onto $2 nodes within $3 s (via node $1)"
}

node_of() {  # node_of ID: the namespace index of a node id, from inst.json's ranks
  json "$WORK/inst.json" "[r['name'] for r in j['ranks'] if r['node'] == '$1'][0][1:]"
}

complete() {  # complete NODE: one completion; prints its text or fails
  curl -s -H "$AUTH" --max-time 10 "$(api "$1")/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}' > "$WORK/complete.json" || true
  json "$WORK/complete.json" "j['choices'][0]['text']" 2>/dev/null
}

wait_complete() {  # wait_complete NODE SECONDS: a completion succeeds within SECONDS
  local start=$SECONDS
  while [ $((SECONDS - start)) -lt "$2" ]; do
    if text=$(complete "$1") && [ -n "$text" ]; then
      echo "instance_netns_test: a request succeeds again after $((SECONDS - start)) s: '$text'"
      return 0
    fi
    sleep 0.5
  done
  cat "$WORK/complete.json"
  fail "no successful request within $2 s"
}

# The coordinator, a client node and a victim (the two non-coordinators).
roles() {
  COORD=$(node_of "$(json "$WORK/inst.json" "j['coordinator']")")
  OTHERS=()
  for i in $(seq 1 $N); do [ "$i" = "$COORD" ] || OTHERS+=("$i"); done
  CLIENT=${OTHERS[0]}
  VICTIM=${OTHERS[1]}
}

# stream_and_break CLIENT WHAT COMMAND...: streams through CLIENT, runs COMMAND once tokens
# flow, and checks the stream pauses and resumes on the re-placed instance: it ends with all
# its tokens, finish_reason "length" and no error event (resume_netns_test.sh checks the text).
stream_and_break() {
  local client=$1 what=$2
  shift 2
  rm -f "$WORK/stream.out"
  curl -sN -H "$AUTH" --max-time 90 "$(api "$client")/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0.8, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}' \
    > "$WORK/stream.out" &
  local curl_pid=$!
  for _ in $(seq 1 100); do
    local n; n=$(grep -c '^data: {"choices"' "$WORK/stream.out" 2>/dev/null) || true
    [ "${n:-0}" -ge 5 ] && break
    sleep 0.05
  done
  local t0; t0=$(date +%s%N)
  T_BREAK=$t0
  "$@"
  wait "$curl_pid" || true
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  ! grep -q '^data: {"error"' "$WORK/stream.out" || { grep '^data: {"error"' "$WORK/stream.out" | head -c 300; fail "$what: the stream ended with an error"; }
  grep -q '^: cohort-resumed ' "$WORK/stream.out" || { tail -3 "$WORK/stream.out"; fail "$what: the stream was not resumed (it finished before the failure?)"; }
  grep -q '"finish_reason":"length"' "$WORK/stream.out" || fail "$what: no finish_reason length"
  grep -q '"completion_tokens":120' "$WORK/stream.out" || { grep usage "$WORK/stream.out"; fail "$what: not all 120 tokens"; }
  grep -q '^data: \[DONE\]' "$WORK/stream.out" || fail "$what: no [DONE]"
  local note; note=$(grep '^: cohort-resumed ' "$WORK/stream.out" | tail -1 | sed 's/^: cohort-resumed //')
  echo "instance_netns_test: $what: the stream resumed and finished $ms ms later: $(python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(f\"paused {j['pause_ms']} ms after {j['after_tokens']} tokens, resumed on epoch {j['epoch']} ({j['why'][:120]})\")" "$note")"
}

# --- 1. A 3-node instance, used through a node that is not its coordinator.
for i in $(seq 1 $N); do start_node "$i"; done
wait_members 1 3
curl -s -H "$AUTH" --max-time 40 "$(api 1)/v1/instances" \
  -d "{\"model\": \"$MODEL\", \"nodes\": 3, \"wait_s\": 30}" > "$WORK/created.json"
[ "$(json "$WORK/created.json" "j.get('state')")" = ready ] || { cat "$WORK/created.json"; fail "instance not ready"; }
wait_instance 2 3 10
roles
text=$(complete "$CLIENT") || { cat "$WORK/complete.json"; fail "completion through node $CLIENT"; }
echo "instance_netns_test: tp over 3 nodes (coordinator n$COORD), through n$CLIENT: '$text'"
[[ "$text" == *" "* ]] || fail "no text"
FIRST_TEXT=$text

# --- 2. Kill a non-coordinator during a stream.
stream_and_break "$CLIENT" "SIGKILL n$VICTIM" kill -9 "${PIDS[$VICTIM]}"
wait "${PIDS[$VICTIM]}" 2>/dev/null || true
unset "PIDS[$VICTIM]"
wait_complete "$CLIENT" 30
wait_instance "$CLIENT" 2 5
start_node "$VICTIM"
wait_members "$CLIENT" 3
echo "instance_netns_test: n$VICTIM restarted and rejoined"
rebalance "$VICTIM" 3 40
complete "$VICTIM" > /dev/null || fail "completion after the rebalance"
echo "instance_netns_test: rebalanced onto 3 nodes again"

# --- 3. Cut a non-coordinator's link during a stream.
roles
stream_and_break "$CLIENT" "link of n$VICTIM down" ip link set "csv$TAG-$VICTIM" down
wait_complete "$CLIENT" 30
wait_instance "$CLIENT" 2 5
ip link set "csv$TAG-$VICTIM" up
wait_members "$CLIENT" 3
echo "instance_netns_test: n$VICTIM's link is back and it rejoined"
rebalance "$CLIENT" 3 40
complete "$CLIENT" > /dev/null || fail "completion after the rebalance"
echo "instance_netns_test: rebalanced onto 3 nodes again"

# --- 3b. Cut the coordinator's link while two other nodes forward requests to it.
roles
OLD_COORD=$COORD
plain_t0=$(date +%s%N)
curl -s -H "$AUTH" -D "$WORK/plain.headers" -o "$WORK/plain.out" -w '%{http_code} %{time_total}\n' --max-time 90 "$(api "$VICTIM")/v1/completions" \
  -d '{"prompt": "Once upon a time", "max_tokens": 120, "temperature": 0.8, "ignore_eos": true}' > "$WORK/plain.code" &
plain_pid=$!
stream_and_break "$CLIENT" "link of the coordinator n$COORD down" ip link set "csv$TAG-$COORD" down
wait "$plain_pid" || true
read -r plain_code plain_s < "$WORK/plain.code"
plain_ms=$(python3 -c "print(int(($plain_t0 + $plain_s * 1e9 - $T_BREAK) / 1e6))")
[ "$plain_code" = 200 ] || { cat "$WORK/plain.out"; fail "plain request through n$VICTIM: HTTP $plain_code, not 200"; }
[ "$(json "$WORK/plain.out" "j['usage']['completion_tokens'] == 120 and j['choices'][0]['finish_reason'] == 'length'")" = True ] ||
  { cat "$WORK/plain.out"; fail "plain request through n$VICTIM: not all of its 120 tokens"; }
retries=$(tr -d '\r' < "$WORK/plain.headers" | sed -n 's/^[Xx]-[Cc]ohort-[Rr]etries: *//p')
[ "${retries:-0}" -ge 1 ] || fail "plain request through n$VICTIM was answered without a retry (the cut came after it?)"
echo "instance_netns_test: plain request through n$VICTIM: 200 with 120 tokens after $retries retry(ies), $plain_ms ms after the cut"
wait_complete "$CLIENT" 30
wait_instance "$CLIENT" 2 5
roles
[ "$COORD" != "$OLD_COORD" ] || fail "the cut node n$OLD_COORD is still the coordinator"
echo "instance_netns_test: re-placed on 2 nodes, coordinator n$COORD"
ip link set "csv$TAG-$OLD_COORD" up
wait_members "$CLIENT" 3
wait_members "$OLD_COORD" 3
echo "instance_netns_test: n$OLD_COORD's link is back and it rejoined"
rebalance "$OLD_COORD" 3 40
complete "$OLD_COORD" > /dev/null || { cat "$WORK/complete.json"; fail "completion through n$OLD_COORD after the rebalance"; }
echo "instance_netns_test: rebalanced onto 3 nodes again"

# --- 4. A memory budget no single node (nor two) can meet.
stop_all
FILE_BYTES=$(stat -c %s "$MODEL")
BUDGET=$((FILE_BYTES * 55 / 100))
EXTRA=("${LATENCY[@]}" --max-memory "$BUDGET")
for i in $(seq 1 $N); do start_node "$i"; done
wait_members 1 3
curl -s -H "$AUTH" --max-time 40 "$(api 2)/v1/instances" -d "{\"model\": \"$MODEL\", \"wait_s\": 30}" > "$WORK/created.json"
[ "$(json "$WORK/created.json" "j.get('state')")" = ready ] || { cat "$WORK/created.json"; fail "max-memory instance not ready"; }
cp "$WORK/created.json" "$WORK/inst.json"
check=$(json "$WORK/inst.json" "' '.join(f\"{r['name']}:{r['weight_bytes']/$FILE_BYTES:.3f}:{(r['weight_bytes']+r['kv_bytes'])<=$BUDGET}\" for r in j['ranks'])")
echo "instance_netns_test: --max-memory $BUDGET (55% of the file): ranks name:share-of-file:fits = $check"
[ "$(json "$WORK/inst.json" "len(j['ranks'])")" = 3 ] || fail "not on 3 nodes"
[ "$(json "$WORK/inst.json" "all(r['weight_bytes'] <= 0.4 * $FILE_BYTES and r['weight_bytes'] + r['kv_bytes'] <= $BUDGET for r in j['ranks'])")" = True ] ||
  fail "a rank holds more than 40% of the model or exceeds its budget"
roles
text=$(complete "$CLIENT") || { cat "$WORK/complete.json"; fail "completion on the max-memory instance"; }
echo "instance_netns_test: generates: '$text'"
kill -9 "${PIDS[$VICTIM]}"
wait "${PIDS[$VICTIM]}" 2>/dev/null || true
unset "PIDS[$VICTIM]"
for _ in $(seq 1 100); do
  curl -s -H "$AUTH" --max-time 2 "$(api "$CLIENT")/v1/instances/stories260K" > "$WORK/inst.json" || true
  [ "$(json "$WORK/inst.json" "j.get('state')" 2>/dev/null)" = unplaced ] && break
  sleep 0.2
done
[ "$(json "$WORK/inst.json" "j.get('state')")" = unplaced ] || { cat "$WORK/inst.json"; fail "the instance should not fit on 2 nodes"; }
echo "instance_netns_test: on 2 nodes it says: $(json "$WORK/inst.json" "j['reason']")"

# --- 5. Only one node has the model file.
stop_all
# A fresh cluster: the nodes would otherwise bring back the last instance (of the same name)
# from their state directories.
rm -f "$WORK"/state-*/instances.json
EXTRA=("${LATENCY[@]}")
mkdir -p "$WORK/only-n1"
cp "$MODEL" "$WORK/only-n1/"
HIDE[2]="$WORK/only-n1"
HIDE[3]="$WORK/only-n1"
MODELS_DIR="$WORK/only-n1"  # the API offers only what is under it
for i in $(seq 1 $N); do start_node "$i"; done
wait_members 1 3
curl -s -H "$AUTH" --max-time 40 "$(api 1)/v1/instances" \
  -d "{\"model\": \"$WORK/only-n1/$(basename "$MODEL")\", \"nodes\": 3, \"wait_s\": 30}" > "$WORK/created.json"
[ "$(json "$WORK/created.json" "j.get('state')")" = ready ] || { cat "$WORK/created.json"; fail "instance from one node's file not ready"; }
cp "$WORK/created.json" "$WORK/inst.json"
[ "$(node_of "$(json "$WORK/inst.json" "j['coordinator']")")" = 1 ] || fail "the coordinator is not the node with the file"
text=$(complete 2) || { cat "$WORK/complete.json"; fail "completion on the streamed instance"; }
[ "$text" = "$FIRST_TEXT" ] || fail "streamed shares give '$text', local files gave '$FIRST_TEXT'"
for i in 2 3; do
  ls "$WORK/state-$i/cache/"*.gguf > /dev/null 2>&1 || fail "n$i has no streamed share in its cache"
done
echo "instance_netns_test: n2 and n3 were streamed their shares ($(du -c -B1 "$WORK"/state-2/cache/*.gguf | tail -1 | cut -f1) bytes on n2's disk of a $(stat -c %s "$MODEL")-byte file); same text: '$text'"
echo "instance_netns_test: PASS"
