#!/usr/bin/env bash
# The main job from a fresh Debian 12 machine: installs packages, builds the release preset,
# and starts a 3-node cohort cluster on this machine — three `cohort serve --cluster`
# processes, each in its own network namespace joined by a bridge when run as root, on
# loopback addresses otherwise. It loads the demo model (stories260K, a real tiny Llama
# trained on children's stories) across the three nodes with POST /v1/instances, sends one
# request through a node's OpenAI API, prints the story and the tokens/s, and leaves the
# cluster serving with its address printed (Ctrl-C stops every node).
#   scripts/run.sh                                  # the demo model, a story, keep serving
#   scripts/run.sh path/to/model.gguf "Hello"       # your model and prompt
#   ONESHOT=1 scripts/run.sh                        # exit after the answer (scripts, CI)
#   NODES=2 LAYOUT=pp scripts/run.sh                # other node counts and layouts
#   NETNS=0 scripts/run.sh                          # loopback addresses even as root
#   COHORT_BIN=build/x/bin/cohort scripts/run.sh    # a binary already built
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# COHORT_BIN: use an already built binary (skips installing and building).
if [ -z "${COHORT_BIN:-}" ]; then
  scripts/install-deps.sh
  cmake --preset release >/dev/null
  cmake --build --preset release -j "$(nproc)" --target cohort >/dev/null
fi
cohort=$(readlink -f "${COHORT_BIN:-$root/build/release/bin/cohort}")
model=$(readlink -f "${1:-models/stories260K.gguf}")
prompt="${2:-Once upon a time}"
nodes="${NODES:-3}"
layout="${LAYOUT:-tp}"
tokens="${TOKENS:-200}"
secret="cohort-run-$$-$RANDOM"
work=$(mktemp -d /tmp/cohort-run.XXXXXX)
tag=$$
use_netns=0
if [ "$(id -u)" -eq 0 ] && [ "${NETNS:-1}" != 0 ] && ip netns list >/dev/null 2>&1; then use_netns=1; fi

pids=()
cleanup() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "$use_netns" = 1 ]; then
    for i in $(seq 1 "$nodes"); do ip netns del "crun$tag-$i" 2>/dev/null || true; done
    ip link del "crbr$tag" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo; echo "stopping the cluster"; exit 0' INT TERM

# Addresses: 10.234.X.i in namespaces (the host reaches them over the bridge), else 127.0.0.1i.
if [ "$use_netns" = 1 ]; then
  subnet="10.234.$((tag % 200 + 20))"
  ip link add "crbr$tag" type bridge
  ip addr add "$subnet.254/24" dev "crbr$tag"
  ip link set "crbr$tag" up
  for i in $(seq 1 "$nodes"); do
    ip netns add "crun$tag-$i"
    ip link add "crv$tag-$i" type veth peer name "crp$tag-$i"
    ip link set "crp$tag-$i" netns "crun$tag-$i"
    ip link set "crv$tag-$i" master "crbr$tag" up
    ip netns exec "crun$tag-$i" ip link set lo up
    ip netns exec "crun$tag-$i" ip addr add "$subnet.$i/24" dev "crp$tag-$i"
    ip netns exec "crun$tag-$i" ip link set "crp$tag-$i" up
  done
  addr() { echo "$subnet.$1"; }
  where="network namespaces crun$tag-1..$nodes on bridge crbr$tag"
else
  addr() { echo "127.0.0.$((10 + $1))"; }
  where="loopback addresses"
fi
peers=$(for i in $(seq 1 "$nodes"); do printf '%s,' "$(addr "$i"):7946"; done)
peers=${peers%,}

echo "starting $nodes cohort nodes ($where); logs in $work"
for i in $(seq 1 "$nodes"); do
  cmd=("$cohort" -t 1 serve --cluster --listen "$(addr "$i"):7946" --host "$(addr "$i")" --port 8080
       --peers "$peers" --no-multicast --secret "$secret" --state-dir "$work/node$i" --name "node$i"
       --models-dir "$(dirname "$(readlink -f "$model")")")
  if [ "$use_netns" = 1 ]; then cmd=(ip netns exec "crun$tag-$i" "${cmd[@]}"); fi
  "${cmd[@]}" > "$work/node$i.log" 2>&1 &
  pids+=($!)
done

api="http://$(addr 1):8080"
json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
for _ in $(seq 1 150); do
  alive=$(curl -s --max-time 2 "$api/v1/cluster" 2>/dev/null | json "sum(m['state'] == 'alive' for m in j['members'])" 2>/dev/null || echo 0)
  [ "$alive" = "$nodes" ] && break
  sleep 0.2
done
[ "$alive" = "$nodes" ] || { echo "the nodes did not form a cluster:"; tail -n 20 "$work"/*.log; exit 1; }
echo "cluster formed: $nodes nodes alive"

echo "loading $(basename "$model") across the cluster (POST $api/v1/instances) ..."
curl -s --max-time 120 "$api/v1/instances" \
  -d "{\"model\": \"$model\", \"layout\": \"$layout\", \"nodes\": $nodes, \"wait_s\": 90}" > "$work/instance.json"
state=$(json "j.get('state')" < "$work/instance.json")
if [ "$state" != ready ]; then
  echo "the instance is not ready ($state):"; cat "$work/instance.json"; tail -n 20 "$work"/*.log; exit 1
fi
python3 - "$work/instance.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"instance {j['id']}: plan {j['plan']} on {len(j['ranks'])} node(s), coordinator {j['ranks'][0]['name']}")
for r, rank in enumerate(j["ranks"]):
    print(f"  rank {r}: {rank['name']:8} weights {rank['weight_bytes'] / 1024:8.1f} KiB, KV {rank['kv_bytes'] / 1024:8.1f} KiB")
PY

# Ask a node that is not the coordinator, so the request is forwarded like any client's.
coordinator=$(json "j['ranks'][0]['name']" < "$work/instance.json")
ask=$nodes
[ "node$ask" = "$coordinator" ] && ask=1
ask_api="http://$(addr "$ask"):8080"
body=$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": int(sys.argv[2]), "temperature": 0}))' "$prompt" "$tokens")
echo "asking node$ask (POST $ask_api/v1/completions): \"$prompt\""
echo
start=$(date +%s%N)
curl -s --max-time 300 "$ask_api/v1/completions" -d "$body" > "$work/answer.json"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
python3 - "$work/answer.json" "$prompt" "$ms" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
if "choices" not in j:
    print("error:", json.dumps(j)); sys.exit(1)
print(sys.argv[2] + j["choices"][0]["text"])
u, ms = j["usage"], int(sys.argv[3])
print()
print(f"[stats] {u['completion_tokens']} tokens in {ms} ms: {u['completion_tokens'] * 1000.0 / max(ms, 1):.1f} tok/s "
      f"(prompt {u['prompt_tokens']} tokens, through the API and the cluster) | finish {j['choices'][0]['finish_reason']}")
PY

echo
if [ "${ONESHOT:-0}" = 1 ]; then exit 0; fi
echo "the cluster is serving: $api (any node: $(for i in $(seq 1 "$nodes"); do printf 'http://%s:8080 ' "$(addr "$i")"; done))"
echo "  curl $api/v1/completions -d '{\"prompt\": \"Once upon a time\", \"max_tokens\": 64}'"
echo "  curl $api/v1/cluster    |    curl $api/v1/instances"
echo "Ctrl-C stops all nodes."
wait
