#!/usr/bin/env bash
# Two network namespaces joined by a veth pair capped at 1 Gbit/s with tc tbf, the TCP
# transport adding 100 us of one-way delay (this kernel has no netem): `cohort logits` with
# the coordinator in one namespace and a worker in the other (separate addresses) must write
# the single-process logits. The worker holds a cluster secret: the coordinator's namespace
# first tries without it (and with another one) and is refused, and the worker, started with
# --once, is still there for the real job. Skips (exit 77) only without root or the `ip`/`tc`
# tools.
#
#   netns_test.sh COHORT_BINARY MODEL
set -euo pipefail
cohort=$1
model=$2

if [[ $(id -u) -ne 0 ]]; then echo "SKIP: network namespaces need root"; exit 77; fi
for tool in ip tc python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: no '$tool' on this machine"; exit 77; }
done

tag=c$$
ns_a=$tag-a ns_b=$tag-b
tmp=$(mktemp -d)
cleanup() {
  [[ -n ${worker_pid:-} ]] && kill "$worker_pid" 2>/dev/null || true
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

ip netns add "$ns_a"
ip netns add "$ns_b"
ip link add "$tag-va" type veth peer name "$tag-vb"
ip link set "$tag-va" netns "$ns_a"
ip link set "$tag-vb" netns "$ns_b"
ip -n "$ns_a" addr add 10.77.0.1/24 dev "$tag-va"
ip -n "$ns_b" addr add 10.77.0.2/24 dev "$tag-vb"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$tag-va" up
ip -n "$ns_b" link set "$tag-vb" up
ip netns exec "$ns_a" tc qdisc add dev "$tag-va" root tbf rate 1gbit burst 128kb latency 10ms
ip netns exec "$ns_b" tc qdisc add dev "$tag-vb" root tbf rate 1gbit burst 128kb latency 10ms

tokens=1,10,20,30,40,50,60,70,80,90,100,110,120,130,140,150,7,300,42,11
"$cohort" -t 1 logits -m "$model" --tokens "$tokens" -b 5 -o "$tmp/single.f32"

echo "netns test secret $$ $RANDOM $RANDOM" >"$tmp/secret"
echo "not the secret" >"$tmp/wrong"
# Without a secret a worker will not listen on a non-loopback address.
if ip netns exec "$ns_b" "$cohort" worker --listen 10.77.0.2:0 --once >/dev/null 2>"$tmp/refused.err"; then
  echo "FAIL: a worker listened on 10.77.0.2 without a secret"; exit 1
fi
grep -q "needs --secret" "$tmp/refused.err" || { echo "FAIL: no reason given"; cat "$tmp/refused.err"; exit 1; }

ip netns exec "$ns_b" "$cohort" worker --listen 10.77.0.2:0 --once --secret-file "$tmp/secret" \
  >"$tmp/worker.out" 2>"$tmp/worker.err" &
worker_pid=$!
for _ in $(seq 100); do grep -q "listening on" "$tmp/worker.out" && break; sleep 0.05; done
address=$(sed -n 's/.*listening on //p' "$tmp/worker.out")
[[ $address == 10.77.0.2:* ]] || { echo "FAIL: worker address '$address'"; cat "$tmp/worker.err"; exit 1; }

for attempt in none wrong; do
  extra=()
  [[ $attempt == wrong ]] && extra=(--secret-file "$tmp/wrong")
  if ip netns exec "$ns_a" "$cohort" -t 1 logits -m "$model" --tokens "$tokens" -b 5 -o "$tmp/outsider.f32" \
       --workers "$address" --layout tp "${extra[@]}" 2>"$tmp/outsider.err"; then
    echo "FAIL: a coordinator with secret '$attempt' ran a job"; exit 1
  fi
  kill -0 "$worker_pid" || { echo "FAIL: the worker died after the '$attempt' attempt"; cat "$tmp/worker.err"; exit 1; }
done
ip netns exec "$ns_a" "$cohort" -t 1 logits -m "$model" --tokens "$tokens" -b 5 -o "$tmp/dist.f32" \
  --workers "$address" --layout tp --link-latency-us 100 --secret-file "$tmp/secret"
wait "$worker_pid"
worker_pid=

python3 - "$tmp/single.f32" "$tmp/dist.f32" <<'PY'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) and a, "logit files differ in size"
n = 512
diff = max(abs(x - y) for x, y in zip(a, b))
same = all(max(range(n), key=lambda i: a[r*n+i]) == max(range(n), key=lambda i: b[r*n+i])
           for r in range(len(a) // n))
print(f"max |diff| {diff:.3g}, argmax equal on every row: {same}")
sys.exit(0 if diff <= 1e-4 and same else 1)
PY
echo "PASS: coordinator 10.77.0.1 and worker $address across namespaces, 1 Gbit/s tbf, 100 us emulated delay, encrypted; outsiders refused"
