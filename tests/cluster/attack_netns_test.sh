#!/usr/bin/env bash
# Attacks on a running 3-node `cohort serve --cluster` (issue 23, acceptance 1), one network
# namespace per node, the model loaded as tp over all 3 with an API key set. From a namespace
# on the same bridge without the secret (an outsider), and from a member's namespace without
# it (another process on a member machine):
#   - a job on every worker port: in clear, and keyed by another secret; a job whose model the
#     worker lacks (a cache fill); a job of 2^31-1 threads — also with the right secret, from
#     the outsider (not a member) and from the member's host (refused by name);
#   - a job that points rank 0 at another host (a port scan through the worker), with the
#     right secret from the member's host;
#   - a TCP port scan of node 1, then 64 KiB of random bytes to every open port of every node
#     (and a UDP datagram of them to each);
#   - every member-to-worker connection recorded on the bridge while the model loaded (secure
#     handshake, proof and job) replayed byte for byte;
#   - the relay port spoken to in plain HTTP and in TLS without the key; the API without a
#     key and with a wrong one;
#   - silent connections holding worker slots, and a flood of 1500 connections on each of the
#     API, worker and control ports of the node a client uses and the relay and API ports of
#     the coordinator, during which that client must still get its completion.
# Afterwards: every node alive, no worker job ran (no "serving" line beyond the instance's),
# no share was written to any cache, the same members and the same placement (epoch and
# ranks), and the same answer as before the attacks.
#
# Needs root and tcpdump; exits 77 (skipped) without them. About 40-70 s.
#
# usage: attack_netns_test.sh PATH/TO/cohort PATH/TO/cluster_attack_job PATH/TO/model.gguf
set -euo pipefail

TEST=attack_netns_test
COHORT=$(readlink -f "$1")
ATTACK_JOB=$(readlink -f "$2")
MODEL=$(readlink -f "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
TOOLS="$HERE/attack_tools.py"
N=3
if [ "$(id -u)" -ne 0 ]; then echo "$TEST: needs root for network namespaces; skipped"; exit 77; fi
command -v tcpdump > /dev/null || { echo "$TEST: needs tcpdump (scripts/install-deps.sh); skipped"; exit 77; }
# shellcheck source=netns_cluster.sh
. "$HERE/netns_cluster.sh"
netns_setup
OUTSIDER=9
netns_add $OUTSIDER

capture_start "$WORK/load.pcap" "tcp port 7950"
for i in $(seq 1 $N); do start_node "$i"; done
wait_members 1 3
load_instance 1 3
capture_stop
COORD=$(coordinator_index)
CLIENT=$(( COORD % N + 1 ))   # a node that is not the coordinator

complete() {  # complete: the completion's text through $CLIENT, from its own namespace
  in_ns "$CLIENT" curl -s --max-time "${1:-20}" -H "Authorization: Bearer $API_KEY" \
    "http://$SUBNET.$CLIENT:8080/v1/completions" \
    -d '{"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}' > "$WORK/complete.json" || true
  json "$WORK/complete.json" "j['choices'][0]['text']" 2>/dev/null
}
BASE=$(complete) || { cat "$WORK/complete.json"; fail "no completion before the attacks"; }
echo "$TEST: before: '$BASE' (coordinator n$COORD, client n$CLIENT)"

# What must not change.
snapshot() {
  api_get 1 /v1/cluster > "$WORK/c.json"
  api_get 1 /v1/instances/stories260K > "$WORK/i.json"
  {
    json "$WORK/c.json" "sorted((m['id'], m['state']) for m in j['members'])"
    json "$WORK/i.json" "(j['state'], j['epoch'], j['coordinator'], [(r['node'], r['name']) for r in j['ranks']])"
    for i in $(seq 1 $N); do
      echo "n$i jobs served: $(grep -c 'serving .*stories260K' "$WORK/n$i.log" || true)"
      find "$WORK/state-$i" -path '*cache*' -type f -printf '%P %s\n' 2>/dev/null | sort
    done
  } > "$1"
}
snapshot "$WORK/before.txt"

expect_refused() {  # expect_refused WHAT FROM ARGS...: cluster_attack_job must exit 0 (refused)
  local what=$1 from=$2 out
  shift 2
  out=$(in_ns "$from" "$ATTACK_JOB" "$@" 2>&1) || fail "$what (from ns $from): the job was accepted: $out"
  echo "$out" | grep -q '"ok":false' || fail "$what: $out"
  echo "$out"
}

THREADS_MAX=2147483647
for from in $OUTSIDER $COORD; do
  for i in $(seq 1 $N); do
    w="$SUBNET.$i:7950"
    expect_refused "a plain job to n$i" $from "$w" - "$MODEL" 1 > /dev/null
    expect_refused "a job with another secret to n$i" $from "$w" "not the secret" "$MODEL" 1 > /dev/null
    expect_refused "a cache fill of n$i" $from "$w" "not the secret" "$MODEL" 1 fill > /dev/null
    expect_refused "2^31-1 threads to n$i" $from "$w" "not the secret" "$MODEL" $THREADS_MAX > /dev/null
  done
done
# With the right secret: the outsider is no member, the member's job is refused by name.
out=$(expect_refused "2^31-1 threads, right secret, outsider" $OUTSIDER "$SUBNET.$CLIENT:7950" "$SECRET" "$MODEL" $THREADS_MAX)
echo "$out" | grep -q "does not admit\|not a member" || fail "outsider with the secret: $out"
out=$(expect_refused "2^31-1 threads, right secret, member" $COORD "$SUBNET.$CLIENT:7950" "$SECRET" "$MODEL" $THREADS_MAX)
echo "$out" | grep -q "threads" || fail "2^31-1 threads from a member: not refused by name: $out"
out=$(expect_refused "a port scan through n$CLIENT" $COORD "$SUBNET.$CLIENT:7950" "$SECRET" "$MODEL" 1 scan "$SUBNET.254:22")
echo "$out" | grep -q "rank 0" || fail "port scan job: $out"
echo "$TEST: jobs refused (plain, other secret, cache fill, 2^31-1 threads, port scan)"

# A port scan of node 1 from the outsider, then garbage to every open port of every node.
in_ns $OUTSIDER python3 "$TOOLS" scan "$SUBNET.1" 1 20000 > "$WORK/scan.json"
echo "$TEST: open on n1: $(cat "$WORK/scan.json")"
PORTS=$(json "$WORK/scan.json" "' '.join(map(str, j['open']))")
for p in 7946 7950 7951 8080; do echo " $PORTS " | grep -q " $p " || fail "port $p not found open by the scan"; done
for i in $(seq 1 $N); do
  in_ns $OUTSIDER python3 "$TOOLS" garbage "$SUBNET.$i" $PORTS > "$WORK/garbage-$i.json"
  in_ns $COORD python3 "$TOOLS" garbage "$SUBNET.$i" $PORTS > /dev/null
done
echo "$TEST: garbage: $(cat "$WORK/garbage-1.json")"

# Recorded handshakes and jobs, replayed from the outsider and from a member's host.
replayed=0
for i in $(seq 1 $N); do
  for from in $OUTSIDER $COORD; do
    in_ns $from python3 "$TOOLS" handshakes "$WORK/load.pcap" "$SUBNET.$i" 7950 > "$WORK/replay.json"
    replayed=$((replayed + $(json "$WORK/replay.json" "len(j['replays'])")))
  done
done
[ "$replayed" -gt 0 ] || fail "no recorded worker connection to replay"
echo "$TEST: $replayed recorded connections replayed"

# The relay port without the key; the API without a key or with a wrong one.
for i in $(seq 1 $N); do
  if in_ns $OUTSIDER curl -s --max-time 3 "http://$SUBNET.$i:7951/v1/models" -o /dev/null; then fail "plain HTTP answered on n$i's relay port"; fi
  if in_ns $OUTSIDER curl -sk --max-time 3 "https://$SUBNET.$i:7951/v1/models" -o /dev/null; then fail "TLS without the key answered on n$i's relay port"; fi
  code=$(in_ns $OUTSIDER curl -s --max-time 3 -o /dev/null -w '%{http_code}' "http://$SUBNET.$i:8080/v1/completions" -d '{"prompt":"x"}')
  [ "$code" = 401 ] || fail "no key: $code"
  code=$(in_ns $OUTSIDER curl -s --max-time 3 -o /dev/null -w '%{http_code}' -H "Authorization: Bearer sk-guess" "http://$SUBNET.$i:8080/v1/completions" -d '{"prompt":"x"}')
  [ "$code" = 401 ] || fail "a wrong key: $code"
done

# Slots held by silent connections, then a flood on every port of the client's node while
# its client asks for a completion.
in_ns $OUTSIDER python3 "$TOOLS" flood "$SUBNET.$CLIENT" 7950 64 4 > /dev/null &
held=($!)
in_ns $COORD python3 "$TOOLS" flood "$SUBNET.$CLIENT" 7950 64 4 > /dev/null &
held+=($!)
wait "${held[@]}"   # not the nodes: they run in the background too
FLOODERS=()
FLOODS="$CLIENT:8080 $CLIENT:7950 $CLIENT:7946 $COORD:7951 $COORD:8080"
for f in $FLOODS; do
  in_ns $OUTSIDER python3 "$TOOLS" flood "$SUBNET.${f%:*}" "${f#*:}" 1500 10 > "$WORK/flood-${f/:/-}.json" &
  FLOODERS+=($!)
done
sleep 2
t0=$(date +%s%N)
during=$(complete 15) || { cat "$WORK/complete.json"; fail "no completion during the connection flood"; }
echo "$TEST: during the flood: '$during' in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
wait "${FLOODERS[@]}"
for f in $FLOODS; do echo "$TEST: flood on n$f: $(cat "$WORK/flood-${f/:/-}.json")"; done
[ "$during" = "$BASE" ] || fail "during the flood: '$during', before: '$BASE'"

# Nothing changed, and the cluster serves the same answer.
for i in $(seq 1 $N); do kill -0 "${PIDS[$i]}" 2>/dev/null || fail "node $i died"; done
snapshot "$WORK/after.txt"
diff "$WORK/before.txt" "$WORK/after.txt" || fail "the cluster's state changed under attack"
after=$(complete) || { cat "$WORK/complete.json"; fail "no completion after the attacks"; }
[ "$after" = "$BASE" ] || fail "after the attacks: '$after', before: '$BASE'"
grep -q "refused a connection" "$WORK"/n*.log || fail "no node logged a refused connection"
echo "$TEST: PASS (every attack refused; members, placement, caches and the answer unchanged)"
