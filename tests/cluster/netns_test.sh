#!/usr/bin/env bash
# Forms 4-node clusters of `cohort node` processes, one per network namespace, each namespace
# joined by a veth pair to one bridge: first by multicast beacons alone (no --peers), then by
# --peers alone (multicast off). Every node must report, through GET /v1/cluster, the same
# four members alive, the same leader and the same agreed state, including a placement
# proposed on one node. The multicast run also has a fifth namespace with a wrong-secret node
# and a garbage sender, which must change nothing but drop counters; the peers run SIGKILLs
# the leader (the rest agree on three, then it restarts with its id and rejoins) and cuts a
# node's link (the rest agree on three, then it heals). Needs root; exits 77 (skipped)
# without it. Cleans up on any exit.
#
# usage: netns_test.sh PATH/TO/cohort
set -euo pipefail
# `cohort node` serves its HTTP routes beyond loopback only behind a key.
API_KEY="netns-test-key"

COHORT=$(readlink -f "$1")
if [ "$(id -u)" -ne 0 ]; then
  echo "netns_test: needs root for network namespaces; skipped"
  exit 77
fi
[ -x "$COHORT" ] || { echo "netns_test: $COHORT is not executable"; exit 1; }

N=4
TAG=$$
SUBNET="10.231.$((TAG % 200 + 20))"   # one /24 per concurrent run
BR="chbr$TAG"
WORK=$(mktemp -d /tmp/cohort-netns.XXXXXX)
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for i in $(seq 1 $((N + 1))); do ip netns del "ch$TAG-$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

setup_network() {
  ip link add "$BR" type bridge
  # No IGMP snooping: with no querier on this bridge it could hold back the beacons.
  echo 0 > "/sys/class/net/$BR/bridge/multicast_snooping"
  ip addr add "$SUBNET.254/24" dev "$BR"   # the host queries the nodes' HTTP ports
  ip link set "$BR" up
  for i in $(seq 1 $((N + 1))); do   # N nodes and one intruder
    local ns="ch$TAG-$i"
    ip netns add "$ns"
    ip link add "chv$TAG-$i" type veth peer name "chp$TAG-$i"
    ip link set "chp$TAG-$i" netns "$ns"
    ip link set "chv$TAG-$i" master "$BR" up
    ip netns exec "$ns" ip link set lo up
    ip netns exec "$ns" ip addr add "$SUBNET.$i/24" dev "chp$TAG-$i"
    ip netns exec "$ns" ip link set "chp$TAG-$i" up
    ip netns exec "$ns" ip route add 224.0.0.0/4 dev "chp$TAG-$i"
  done
}

# start_node MODE I [SECRET]: MODE is "multicast" or "peers"; sets NODE_PID.
start_node() {
  local mode=$1 i=$2 secret=${3:-"netns test secret"}
  local args=(node --listen "$SUBNET.$i:7946" --http "$SUBNET.$i:7980" --api-key "$API_KEY" --secret "$secret"
              --state-dir "$WORK/$mode-$i" --name "n$i" --heartbeat-ms 100 --suspect-ms 1000
              --dead-ms 2500 --no-benchmarks)
  if [ "$mode" = peers ]; then
    local peers=""
    for k in $(seq 1 $N); do
      [ "$k" = "$i" ] || peers="$peers${peers:+,}$SUBNET.$k:7946"
    done
    args+=(--no-multicast --peers "$peers")
  fi
  ip netns exec "ch$TAG-$i" "$COHORT" "${args[@]}" >> "$WORK/$mode-$i.log" 2>&1 &
  NODE_PID=$!
}

start_nodes() {
  PIDS=()
  for i in $(seq 1 $N); do
    start_node "$1" "$i"
    PIDS[$i]=$NODE_PID
  done
}

stop_nodes() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}


# check_agreement "I J ..." [PLACEMENT]: prints "OK" when exactly nodes I, J, ... are alive in
# the views of all of them, with one leader (the lowest id) and the same agreed state (and
# PLACEMENT in it, if given); else a reason.
check_agreement() {
  local nodes=$1 placement=${2:-}
  for i in $nodes; do
    curl -s --max-time 2 -H "Authorization: Bearer $API_KEY" "http://$SUBNET.$i:7980/v1/cluster" > "$WORK/view-$i.json" || echo '{}' > "$WORK/view-$i.json"
  done
  python3 - "$WORK" "$nodes" "$placement" <<'PY'
import json, sys
work, nodes, placement = sys.argv[1], sys.argv[2].split(), sys.argv[3]
views, selves = [], []
for i in nodes:
    try:
        v = json.load(open(f"{work}/view-{i}.json"))
        selves.append(v["self"])
    except Exception:
        print(f"node {i}: no answer"); sys.exit(0)
    alive = sorted(m["id"] for m in v["members"] if m["state"] == "alive")
    agreed = sorted(m["id"] for m in v["state"]["members"])
    views.append((alive, v["leader"], agreed, v["state"]["leader"], v["state"]["term"],
                  v["state"]["version"], sorted(v["state"]["placements"])))
first = views[0]
if first[0] != sorted(selves):
    print(f"node {nodes[0]} sees {len(first[0])} alive, not exactly nodes {nodes}"); sys.exit(0)
if first[1] != min(first[0]):
    print("leader is not the lowest id"); sys.exit(0)
for i, v in zip(nodes, views):
    if v != first:
        print(f"node {i} differs: {v} vs {first}"); sys.exit(0)
if placement and placement not in first[6]:
    print(f"placement {placement} missing"); sys.exit(0)
print("OK")
PY
}

ALL=$(seq -s " " 1 $N)

wait_for_agreement() {
  local what=$1 nodes=$2 placement=${3:-} result=""
  for _ in $(seq 1 100); do
    result=$(check_agreement "$nodes" "$placement")
    if [ "$result" = OK ]; then
      echo "netns_test: $what: nodes $nodes agree"
      return 0
    fi
    sleep 0.2
  done
  echo "netns_test: $what: no agreement: $result"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -20 "$f"; done
  return 1
}

json_field() {  # json_field FILE EXPR: prints a field of a saved view
  python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print($2)" "$1"
}

# The intruder namespace: a node with the wrong secret, then random datagrams to every node
# and the multicast group, and random bytes on TCP.
intrude() {
  start_node multicast $((N + 1)) "wrong secret"
  PIDS[$((N + 1))]=$NODE_PID
  ip netns exec "ch$TAG-$((N + 1))" python3 - "$SUBNET" "$N" <<'PY'
import os, random, socket, sys
subnet, n = sys.argv[1], int(sys.argv[2])
random.seed(7)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
targets = [(f"{subnet}.{i}", 7946) for i in range(1, n + 1)] + [("239.255.77.76", 7947)]
for k in range(400):
    data = os.urandom(random.randint(1, 1400))
    if k % 4 == 0:
        data = b"CHCP\x01\x01\x00\x00" + data
    u.sendto(data, targets[k % len(targets)])
for i in range(1, n + 1):
    try:
        t = socket.create_connection((f"{subnet}.{i}", 7946), timeout=2)
        t.sendall(os.urandom(3000))
        t.close()
    except OSError:
        pass
PY
}

propose_placement() {  # propose_placement NODE KEY
  local answer
  answer=$(curl -s --max-time 5 -H "Authorization: Bearer $API_KEY" -X POST -d '{"op":"put_placement","key":"'"$2"'","value":{"model":"stories","ranks":4}}' \
           "http://$SUBNET.$1:7980/v1/cluster/changes")
  echo "netns_test: proposed $2 on node $1: $answer"
}

run_multicast() {
  start_nodes multicast
  wait_for_agreement "multicast: membership" "$ALL"
  intrude
  sleep 1.5
  wait_for_agreement "multicast: after a wrong-secret node and garbage" "$ALL"
  curl -s --max-time 2 -H "Authorization: Bearer $API_KEY" "http://$SUBNET.1:7980/v1/cluster" > "$WORK/counters.json"
  local bad_mac malformed
  bad_mac=$(json_field "$WORK/counters.json" 'v["counters"]["dropped"]["bad_mac"]')
  malformed=$(json_field "$WORK/counters.json" 'v["counters"]["dropped"]["malformed"]')
  echo "netns_test: node 1 dropped bad_mac=$bad_mac malformed=$malformed"
  [ "$bad_mac" -gt 0 ] && [ "$malformed" -gt 0 ] || { echo "netns_test: drops not counted"; return 1; }
  propose_placement 3 inst-multicast
  wait_for_agreement "multicast: placement" "$ALL" inst-multicast
  stop_nodes
}

run_peers() {
  start_nodes peers
  wait_for_agreement "peers: membership" "$ALL"
  propose_placement 3 inst-peers
  wait_for_agreement "peers: placement" "$ALL" inst-peers

  # SIGKILL the leader: the others agree on the rest (and keep the placement); it comes back
  # with the same id from its state dir and rejoins.
  local leader_id leader=0 rest
  leader_id=$(json_field "$WORK/view-1.json" 'v["leader"]')
  for i in $ALL; do
    [ "$(json_field "$WORK/view-$i.json" 'v["self"]')" = "$leader_id" ] && leader=$i
  done
  kill -9 "${PIDS[$leader]}"
  wait "${PIDS[$leader]}" 2>/dev/null || true
  rest=$(for i in $ALL; do [ "$i" = "$leader" ] || echo -n "$i "; done)
  wait_for_agreement "peers: leader (node $leader) killed" "$rest" inst-peers
  start_node peers "$leader"
  PIDS[$leader]=$NODE_PID
  wait_for_agreement "peers: node $leader restarted" "$ALL" inst-peers
  [ "$(json_field "$WORK/view-$leader.json" 'v["self"]')" = "$leader_id" ] || { echo "netns_test: new id after restart"; return 1; }

  # Cut node 2's link, then restore it.
  ip link set "chv$TAG-2" down
  rest=$(for i in $ALL; do [ "$i" = 2 ] || echo -n "$i "; done)
  wait_for_agreement "peers: node 2 cut off" "$rest"
  ip link set "chv$TAG-2" up
  wait_for_agreement "peers: node 2 reconnected" "$ALL" inst-peers
  stop_nodes
}

setup_network
run_multicast
run_peers
echo "netns_test: PASS"
