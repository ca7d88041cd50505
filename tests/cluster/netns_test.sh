#!/usr/bin/env bash
# Forms 4-node clusters of `cohort node` processes, one per network namespace, each namespace
# joined by a veth pair to one bridge: first by multicast beacons alone (no --peers), then by
# --peers alone (multicast off). Every node must report, through GET /v1/cluster, the same
# four members alive, the same leader and the same agreed state, including a placement
# proposed on one node. Needs root; exits 77 (skipped) without it. Cleans up on any exit.
#
# usage: netns_test.sh PATH/TO/cohort
set -euo pipefail

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
  for i in $(seq 1 $N); do ip netns del "ch$TAG-$i" 2>/dev/null || true; done
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
  for i in $(seq 1 $N); do
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

# start_nodes MODE: MODE is "multicast" or "peers".
start_nodes() {
  local mode=$1
  PIDS=()
  for i in $(seq 1 $N); do
    local args=(node --listen "$SUBNET.$i:7946" --http "$SUBNET.$i:7980" --secret "netns test secret"
                --state-dir "$WORK/$mode-$i" --name "n$i" --heartbeat-ms 100 --suspect-ms 1000
                --dead-ms 2500 --no-benchmarks)
    if [ "$mode" = peers ]; then
      local peers=""
      for k in $(seq 1 $N); do
        [ "$k" = "$i" ] || peers="$peers${peers:+,}$SUBNET.$k:7946"
      done
      args+=(--no-multicast --peers "$peers")
    fi
    ip netns exec "ch$TAG-$i" "$COHORT" "${args[@]}" > "$WORK/$mode-$i.log" 2>&1 &
    PIDS+=($!)
  done
}

stop_nodes() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  PIDS=()
}

# Prints "OK" when all nodes agree (members, leader, state and, if given, a placement key),
# else a reason.
check_agreement() {
  local placement=${1:-}
  for i in $(seq 1 $N); do
    curl -s --max-time 2 "http://$SUBNET.$i:7980/v1/cluster" > "$WORK/view-$i.json" || echo '{}' > "$WORK/view-$i.json"
  done
  python3 - "$WORK" "$N" "$placement" <<'PY'
import json, sys
work, n, placement = sys.argv[1], int(sys.argv[2]), sys.argv[3]
views = []
for i in range(1, n + 1):
    try:
        v = json.load(open(f"{work}/view-{i}.json"))
    except Exception:
        print(f"node {i}: no answer"); sys.exit(0)
    if "members" not in v:
        print(f"node {i}: no answer"); sys.exit(0)
    alive = sorted(m["id"] for m in v["members"] if m["state"] == "alive")
    agreed = sorted(m["id"] for m in v["state"]["members"])
    views.append((alive, v["leader"], agreed, v["state"]["leader"], v["state"]["term"],
                  v["state"]["version"], sorted(v["state"]["placements"])))
first = views[0]
if len(first[0]) != n:
    print(f"node 1 sees {len(first[0])} alive"); sys.exit(0)
if first[1] != min(first[0]):
    print("leader is not the lowest id"); sys.exit(0)
for i, v in enumerate(views):
    if v != first:
        print(f"node {i + 1} differs: {v} vs {first}"); sys.exit(0)
if placement and placement not in first[6]:
    print(f"placement {placement} missing"); sys.exit(0)
print("OK")
PY
}

wait_for_agreement() {
  local what=$1 placement=${2:-} result=""
  for _ in $(seq 1 100); do
    result=$(check_agreement "$placement")
    if [ "$result" = OK ]; then
      echo "netns_test: $what: all $N nodes agree"
      return 0
    fi
    sleep 0.2
  done
  echo "netns_test: $what: no agreement: $result"
  for f in "$WORK"/*.log; do echo "--- $f"; tail -20 "$f"; done
  return 1
}

run_mode() {
  local mode=$1
  start_nodes "$mode"
  wait_for_agreement "$mode: membership"
  local answer
  answer=$(curl -s --max-time 5 -X POST -d '{"op":"put_placement","key":"inst-'"$mode"'","value":{"model":"stories","ranks":4}}' \
           "http://$SUBNET.3:7980/v1/cluster/changes")
  echo "netns_test: $mode: proposed on node 3: $answer"
  wait_for_agreement "$mode: placement" "inst-$mode"
  stop_nodes
}

setup_network
run_mode multicast
run_mode peers
echo "netns_test: PASS"
