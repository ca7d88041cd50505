# A `cohort serve --cluster` of N nodes, one per network namespace (veth to one bridge,
# --peers only), for the security tests (capture_netns_test.sh, attack_netns_test.sh). Sourced;
# the test sets TEST (its name, for messages), COHORT, MODEL and N first, then calls
# netns_setup. Node i is at $SUBNET.i: control 7946, API 8080, worker service $WORKER_PORT (7950
# unless set), relay 7951.
# Every node takes $API_KEY (a client key) and a context of $CTX tokens (128 unless set); it
# skips its start-up benchmarks unless BENCHMARKS=1.
# Extra namespaces (an attacker's) are added by netns_add INDEX. Everything is removed on exit.

TAG=$$
SUBNET="10.233.$((TAG % 200 + 20))"
BR="csbr$TAG"
WORK=$(mktemp -d "/tmp/cohort-$TEST.XXXXXX")
declare -A PIDS=()
NSES=()
SECRET="the cluster secret of $TEST"
API_KEY="sk-$TEST-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
EXTRA=()             # more `serve` options for every node
declare -A NODE_EXTRA=()  # node -> more options for it alone (one string, split on spaces)
declare -A HIDE=()   # node -> a directory it must not see (a tmpfs over it)
MODELS_DIR=$(dirname "$MODEL")
CTX=${CTX:-128}
WORKER_PORT=${WORKER_PORT:-7950}
BENCHMARKS=${BENCHMARKS:-0}  # 1: the nodes measure their bandwidth and FLOP/s at start

netns_cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for ns in "${NSES[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$WORK"
}
trap netns_cleanup EXIT

fail() {
  echo "$TEST: FAIL: $*"
  for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -25 "$f"; }; done
  exit 1
}

ns_of() { echo "cs$TAG-$1"; }

netns_add() {  # netns_add INDEX: a namespace at $SUBNET.INDEX on the bridge
  local i=$1 ns
  ns=$(ns_of "$i")
  ip netns add "$ns"
  NSES+=("$ns")
  ip link add "csv$TAG-$i" type veth peer name "csp$TAG-$i"
  ip link set "csp$TAG-$i" netns "$ns"
  ip link set "csv$TAG-$i" master "$BR" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$SUBNET.$i/24" dev "csp$TAG-$i"
  ip netns exec "$ns" ip link set "csp$TAG-$i" up
}

netns_setup() {
  ip link add "$BR" type bridge
  ip addr add "$SUBNET.254/24" dev "$BR"
  ip link set "$BR" up
  for i in $(seq 1 "$N"); do netns_add "$i"; done
  PEERS=$(for k in $(seq 1 "$N"); do printf '%s' "$SUBNET.$k:7946,"; done)
  printf 'client %s\n' "$API_KEY" > "$WORK/keys"
  chmod 600 "$WORK/keys"
}

start_node() {  # start_node I: node I in its namespace, logging to $WORK/nI.log
  local i=$1 hide=""
  [ -n "${HIDE[$i]:-}" ] && hide="mount -t tmpfs none ${HIDE[$i]} &&"
  # shellcheck disable=SC2086
  ip netns exec "$(ns_of "$i")" sh -c "$hide exec \"\$0\" \"\$@\"" "$COHORT" -v -t 1 serve --cluster \
    --listen "$SUBNET.$i:7946" --host "$SUBNET.$i" --port 8080 --worker-listen "$SUBNET.$i:$WORKER_PORT" \
    --relay-listen "$SUBNET.$i:7951" --peers "${PEERS%,}" --no-multicast --secret "$SECRET" \
    --api-key-file "$WORK/keys" --state-dir "$WORK/state-$i" --models-dir "$MODELS_DIR" --name "n$i" \
    $([ "$BENCHMARKS" = 1 ] || echo --no-benchmarks) --heartbeat-ms 250 --suspect-ms 1000 --dead-ms 2500 --comm-timeout-ms 2500 -c "$CTX" \
    "${EXTRA[@]}" ${NODE_EXTRA[$i]:-} >> "$WORK/n$i.log" 2>&1 &
  PIDS[$i]=$!
}

stop_nodes() {
  for i in "${!PIDS[@]}"; do kill -9 "${PIDS[$i]}" 2>/dev/null || true; wait "${PIDS[$i]}" 2>/dev/null || true; done
  PIDS=()
}

# in_ns I CMD...: runs CMD in node I's namespace.
in_ns() { local i=$1; shift; ip netns exec "$(ns_of "$i")" "$@"; }

# api I: node I's API, as the host reaches it over the bridge.
api() { echo "http://$SUBNET.$1:8080"; }

# api_get I PATH: GET with the API key from node I's own namespace (plain HTTP).
api_get() { in_ns "$1" curl -s --max-time 5 -H "Authorization: Bearer $API_KEY" "http://$SUBNET.$1:8080$2"; }

# json FILE EXPR: a Python expression over the JSON in FILE (as `j`).
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

wait_members() {  # wait_members NODE COUNT
  for _ in $(seq 1 150); do
    if api_get "$1" /v1/cluster > "$WORK/c.json" 2>/dev/null &&
       [ "$(json "$WORK/c.json" "sum(m['state'] == 'alive' for m in j['members'])" 2>/dev/null)" = "$2" ]; then
      return 0
    fi
    sleep 0.2
  done
  fail "node $1 does not see $2 members alive"
}

# load_instance NODE RANKS: POST /v1/instances for the model on RANKS nodes; leaves it in inst.json.
load_instance() {
  in_ns "$1" curl -s --max-time 60 -H "Authorization: Bearer $API_KEY" "http://$SUBNET.$1:8080/v1/instances" \
    -d "{\"model\": \"$MODELS_DIR/$(basename "$MODEL")\", \"nodes\": $2, \"layout\": \"tp\", \"wait_s\": 45}" \
    > "$WORK/inst.json" || true
  [ "$(json "$WORK/inst.json" "j.get('state') == 'ready' and len(j['ranks']) == $2" 2>/dev/null)" = True ] ||
    { cat "$WORK/inst.json"; fail "the instance is not ready on $2 nodes"; }
}

# coordinator_index: the namespace index of the instance's coordinator (from inst.json).
coordinator_index() {
  json "$WORK/inst.json" "[r['name'] for r in j['ranks'] if r['node'] == j['coordinator']][0][1:]"
}

# capture_start FILE [FILTER...]: tcpdump on the bridge into FILE, started for sure. Immediate
# mode: without it packets wait in the kernel's ring for up to a second, and a capture stopped
# soon after the traffic misses them. capture_stop: ends it, every packet written.
capture_start() {
  local pcap=$1
  shift
  tcpdump -i "$BR" --immediate-mode -U -s 0 -B 65536 -w "$pcap" "$@" 2> "$pcap.log" &
  CAPTURE=$!
  CAPTURE_LOG="$pcap.log"
  for _ in $(seq 1 100); do grep -q "listening on" "$CAPTURE_LOG" 2>/dev/null && return 0; sleep 0.1; done
  cat "$CAPTURE_LOG"
  fail "tcpdump did not start listening on $BR"
}
capture_stop() {
  sleep 0.3
  kill -INT "$CAPTURE"
  wait "$CAPTURE" || true
  # A capture with packets dropped (tcpdump's buffer overrun) is incomplete.
  local dropped
  dropped=$(sed -n 's/^\([0-9]*\) packets dropped by kernel/\1/p' "$CAPTURE_LOG")
  [ "${dropped:-0}" = 0 ] || fail "tcpdump dropped $dropped packets: the capture is incomplete"
}
