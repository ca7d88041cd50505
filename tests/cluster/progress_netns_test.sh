#!/usr/bin/env bash
# Loading progress and the fixed ports, on a 3-node `cohort serve --cluster` (one node per
# network namespace, veth to one bridge, --peers only, every port left at its default):
#   1. Only n1 holds the model (the others see an empty tmpfs over its directory), and n1's
#      traffic to the worker services (TCP 7948) is throttled to 2 Mbit/s (tc htb, u32), so the
#      shares it streams to n2 and n3 take seconds. Polling GET /v1/instances/ID through n2
#      every 0.2 s: the instance's `progress` (phase, bytes, percent, rate, time left, per
#      node) never goes back, is seen part-way (0 < percent < 100, phase "transfer"), and the
#      instance ends ready on 3 nodes, each worker's share fully counted.
#   2. n1's log (not a terminal) carries the progress as plain `[progress]` lines, no
#      carriage returns, rising to a `ready, 100.0%` line.
#   3. Every TCP port a node listens on is a documented one (docs/DEPLOY.md): 7946 control,
#      7948 worker service, 7950-7999 data channels, 8080 API; and the ranks' data
#      connections run to ports in 7950-7999.
# Takes 15-40 s. Needs root and tc; exits 77 (skipped) without them. Cleans up on any exit.
#
# usage: progress_netns_test.sh PATH/TO/cohort PATH/TO/model.gguf
set -euo pipefail

COHORT=$(readlink -f "$1")
MODEL=$(readlink -f "$2")
if [ "$(id -u)" -ne 0 ] || ! command -v tc > /dev/null; then
  echo "progress_netns_test: needs root and tc; skipped"
  exit 77
fi

TEST=progress_netns_test
N=3
# The namespaces and bridge only: these nodes start with the default ports and no client keys,
# as a first `cohort serve --cluster` would.
# shellcheck source=netns_cluster.sh
. "$(dirname "$0")/netns_cluster.sh"
netns_setup

# n1's packets to the worker port go through a 2 Mbit/s bucket; the rest (membership, the
# agreed state, the API) is not held up.
. "$(dirname "$0")/throttle.sh"
throttle_dport "$(ns_of 1)" "csp$TAG-1" 7948 2mbit

mkdir -p "$WORK/only-n1"
cp "$MODEL" "$WORK/only-n1/"
NAME=$(basename "$MODEL" .gguf)
for i in $(seq 1 $N); do
  hide=""
  [ "$i" -ne 1 ] && hide="mount -t tmpfs none $WORK/only-n1 &&"
  # Stderr is a file: the progress must come as plain lines.
  ip netns exec "$(ns_of "$i")" sh -c "$hide exec \"\$0\" \"\$@\"" "$COHORT" -t 1 serve --cluster \
    --listen "$SUBNET.$i:7946" --host "$SUBNET.$i" --peers "${PEERS%,}" --no-multicast --secret "progress test" \
    --state-dir "$WORK/state-$i" --models-dir "$WORK/only-n1" --name "n$i" --no-benchmarks -c 128 \
    >> "$WORK/n$i.log" 2>&1 &
  PIDS[$i]=$!
done


for _ in $(seq 1 150); do
  curl -s --max-time 2 "$(api 2)/v1/cluster" > "$WORK/c.json" 2>/dev/null &&
    [ "$(json "$WORK/c.json" "sum(m['state'] == 'alive' for m in j['members'])")" = 3 ] && break
  sleep 0.2
done
[ "$(json "$WORK/c.json" "sum(m['state'] == 'alive' for m in j['members'])")" = 3 ] || fail "3 members never alive"
grep -Eq "workers $SUBNET.1:7948, data ports 7950-7999, relay [^ ]+, API http://$SUBNET.1:8080" "$WORK/n1.log" ||
  fail "n1 does not say it took the default ports"

# --- 1. Progress through a node that does not coordinate.
curl -s --max-time 10 "$(api 2)/v1/instances" -d "{\"model\": \"$NAME\", \"nodes\": 3, \"layout\": \"tp\"}" \
  > "$WORK/created.json"
: > "$WORK/polls.jsonl"
deadline=$((SECONDS + 90))
while [ $SECONDS -lt $deadline ]; do
  if curl -s --max-time 2 "$(api 2)/v1/instances/$NAME" > "$WORK/p.json" 2>/dev/null && [ -s "$WORK/p.json" ]; then
    python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))" "$WORK/p.json" >> "$WORK/polls.jsonl" || true
    [ "$(json "$WORK/p.json" "j.get('state')")" = ready ] && break
    [ "$(json "$WORK/p.json" "j.get('state')")" = failed ] && { cat "$WORK/p.json"; fail "the instance failed to load"; }
  fi
  sleep 0.2
done
python3 - "$WORK/polls.jsonl" <<'EOF' || fail "the progress seen through n2 is wrong (polls in $WORK/polls.jsonl)"
import json, sys
polls = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert polls and polls[-1]["state"] == "ready", f"never ready: {polls[-1] if polls else None}"
assert len(polls[-1]["ranks"]) == 3, polls[-1]["ranks"]
assert "progress" not in polls[-1], "a ready instance still shows progress"
seen = [p["progress"] for p in polls if p["state"] in ("pending", "loading")]
assert seen, "no poll saw the instance loading"
last = -1.0
for p in seen:
    for key in ("phase", "bytes_done", "bytes_total", "percent", "rate_bytes_per_s", "eta_s", "nodes"):
        assert key in p, f"progress lacks {key}: {p}"
    assert p["percent"] >= last, f"progress went back: {last} -> {p['percent']}"
    last = p["percent"]
midway = [p for p in seen if 0 < p["percent"] < 100 and p["phase"] == "transfer"]
assert midway, f"no poll saw a transfer part-way: {[(p['phase'], p['percent']) for p in seen]}"
m = midway[-1]
assert m["rate_bytes_per_s"] > 0 and m["eta_s"] is not None and m["eta_s"] > 0, m
names = {n["name"]: n for n in m["nodes"]}
assert set(names) == {"n1", "n2", "n3"}, names
assert any(names[w]["phase"] == "transfer" for w in ("n2", "n3")), names
# Every node's bytes: n1 reads its share; n2 and n3 are streamed theirs, then read them.
final = max(seen, key=lambda p: p["percent"])
assert final["bytes_total"] >= sum(n["bytes_total"] for n in final["nodes"]) > 0, final
rate = m["rate_bytes_per_s"] / 1e6
print(f"progress_netns_test: {len(seen)} polls while loading, percents {[p['percent'] for p in seen][:3]}... "
      f"up to {final['percent']}%, {rate:.2f} MB/s mid-transfer")
EOF

# --- 2. Plain progress lines in the coordinator's log.
grep -q $'\r' "$WORK/n1.log" && fail "n1's log (a file) has carriage returns"
grep -qE "\[progress\] instance $NAME epoch [0-9]+: transfer [0-9.]+% .* MB/s.*\(n1 .*n2 transfer" "$WORK/n1.log" ||
  fail "no plain transfer progress line in n1's log"
grep -qE "\[progress\] instance $NAME epoch [0-9]+: ready, 100\.0%" "$WORK/n1.log" || fail "no ready, 100.0% line in n1's log"
echo "progress_netns_test: $(grep -c '\[progress\]' "$WORK/n1.log") progress lines in n1's log, e.g.:"
grep '\[progress\]' "$WORK/n1.log" | sed -n 2p

# --- 3. Only the documented ports.
for i in $(seq 1 $N); do
  in_ns "$i" ss -Hltn > "$WORK/listen-$i.txt"
  in_ns "$i" ss -Htn state established > "$WORK/est-$i.txt"
done
python3 - "$WORK" "$N" <<'EOF' || fail "a port outside the documented ones"
import sys
work, n = sys.argv[1], int(sys.argv[2])
def port(addr): return int(addr.rsplit(":", 1)[1])
documented = lambda p: p in (7946, 7948, 7949, 8080) or 7950 <= p <= 7999
data = 0
for i in range(1, n + 1):
    for line in open(f"{work}/listen-{i}.txt"):
        local = line.split()[3]  # State Recv-Q Send-Q Local Peer
        assert documented(port(local)), f"n{i} listens on {local}"
    for line in open(f"{work}/est-{i}.txt"):
        local, peer = line.split()[2], line.split()[3]  # (state filtered: no State column)
        data += 7950 <= port(peer) <= 7999
assert data > 0, "no connection to a data port: the ranks' channels used other ports"
print(f"progress_netns_test: every listener on 7946/7948/7949/7950-7999/8080; {data} connections to data ports")
EOF
echo "progress_netns_test: PASS"
