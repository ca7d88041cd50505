#!/usr/bin/env bash
# The dashboard in a browser: a 3-node `cohort serve --cluster` (one node per network
# namespace, veth to one bridge, --peers only, an API key) and Debian's headless chromium
# driven by playwright-core (dashboard_test.mjs) against node 1's page:
#   the key is entered, the page shows 3 nodes and their links; the demo model is predicted
#   and placed from the page, it shows loading part-way (a progress bar, percent, bytes, rate;
#   the shares stream from n1, the one node with the file, over a throttled link), then its plan
#   on 3 nodes; the chat panel streams a story;
#   a node SIGKILLed turns dead on the page within 5 s; Rebalance and Remove work from its card.
# A screenshot of each step goes to ARTIFACTS (third argument). Takes 20-40 s. Needs root, tc,
# chromium and playwright-core (npm ci); exits 77 (skipped) without them. Cleans up on exit.
#
# usage: dashboard_netns_test.sh PATH/TO/cohort PATH/TO/model.gguf ARTIFACTS
set -euo pipefail

COHORT=$(readlink -f "$1")
MODEL=$(readlink -f "$2")
ARTIFACTS=$3
HERE=$(cd "$(dirname "$0")" && pwd)
CHROMIUM=${CHROMIUM:-$(command -v chromium || true)}
if [ "$(id -u)" -ne 0 ] || ! command -v tc > /dev/null; then
  echo "dashboard_netns_test: needs root for network namespaces, and tc; skipped"
  exit 77
fi
if [ -z "$CHROMIUM" ] || ! command -v node > /dev/null; then
  echo "dashboard_netns_test: needs chromium and node (scripts/install-deps.sh); skipped"
  exit 77
fi
if ! (cd "$HERE" && node -e "require.resolve('playwright-core')" 2> /dev/null); then
  echo "dashboard_netns_test: needs playwright-core (npm ci at the repository root); skipped"
  exit 77
fi
[ -x "$COHORT" ] || { echo "dashboard_netns_test: $COHORT is not executable"; exit 1; }

N=3
TAG=$$
SUBNET="10.233.$((TAG % 200 + 20))"
BR="cdbr$TAG"
WORK=$(mktemp -d /tmp/cohort-dashboard.XXXXXX)
KEY="dashboard-key-$TAG"
declare -A PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for i in $(seq 1 $N); do ip netns del "cd$TAG-$i" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

ip link add "$BR" type bridge
ip addr add "$SUBNET.254/24" dev "$BR"
ip link set "$BR" up
for i in $(seq 1 $N); do
  ns="cd$TAG-$i"
  ip netns add "$ns"
  ip link add "cdv$TAG-$i" type veth peer name "cdp$TAG-$i"
  ip link set "cdp$TAG-$i" netns "$ns"
  ip link set "cdv$TAG-$i" master "$BR" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "$SUBNET.$i/24" dev "cdp$TAG-$i"
  ip netns exec "$ns" ip link set "cdp$TAG-$i" up
done

# Only n1 holds the model (n2 and n3 see an empty tmpfs over its directory) and n1's packets
# to the worker services (TCP 7948) go through a 1 Mbit/s bucket, so the shares it streams take
# seconds and the page shows the instance loading part-way; the rest is not held up.
. "$HERE/throttle.sh"
throttle_dport "cd$TAG-1" "cdp$TAG-1" 7948 1mbit
mkdir -p "$WORK/only-n1"
cp "$MODEL" "$WORK/only-n1/"
MODEL="$WORK/only-n1/$(basename "$MODEL")"

PEERS=$(for k in $(seq 1 $N); do printf '%s' "$SUBNET.$k:7946,"; done)
# Benchmarks on (a fraction of a second), so the page has measured bandwidth and FLOP/s to show; 2 ms of
# emulated link latency, so a story streams over many SSE events rather than in one burst.
for i in $(seq 1 $N); do
  hide=""
  [ "$i" -ne 1 ] && hide="mount -t tmpfs none $WORK/only-n1 &&"
  ip netns exec "cd$TAG-$i" sh -c "$hide exec \"\$0\" \"\$@\"" "$COHORT" -v -t 1 serve --cluster --listen "$SUBNET.$i:7946" \
    --host "$SUBNET.$i" --port 8080 --peers "${PEERS%,}" --no-multicast --secret "dashboard test" \
    --api-key "$KEY" --state-dir "$WORK/state-$i" --models-dir "$(dirname "$MODEL")" --name "n$i" --heartbeat-ms 250 --suspect-ms 1000 \
    --dead-ms 2500 --comm-timeout-ms 2500 --link-latency-us 2000 -c 256 --chat-template chatml \
    >> "$WORK/n$i.log" 2>&1 &
  PIDS[$i]=$!
done

mkdir -p "$ARTIFACTS"
rm -f "$ARTIFACTS"/*.png  # only this run's screenshots
status=0
DASHBOARD_URL="http://$SUBNET.1:8080/" DASHBOARD_KEY="$KEY" DASHBOARD_MODEL="$MODEL" \
  DASHBOARD_VICTIM="n3" DASHBOARD_VICTIM_PID="${PIDS[3]}" DASHBOARD_ARTIFACTS="$ARTIFACTS" CHROMIUM="$CHROMIUM" \
  node "$HERE/dashboard_test.mjs" || status=$?
if [ "$status" -ne 0 ]; then
  for f in "$WORK"/*.log; do echo "--- $f"; tail -25 "$f"; done
  exit "$status"
fi
echo "dashboard_netns_test: PASS (screenshots in $ARTIFACTS)"
