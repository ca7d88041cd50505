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

TEST=dashboard_netns_test
N=3
CTX=256
WORKER_PORT=7948  # the default, which the throttle below holds up
# Benchmarks on (a fraction of a second), so the page has measured bandwidth and FLOP/s to show.
BENCHMARKS=1
# shellcheck source=netns_cluster.sh
. "$HERE/netns_cluster.sh"
# 2 ms of emulated link latency, so a story streams over many SSE events rather than in one burst.
EXTRA=(--link-latency-us 2000 --chat-template chatml)
netns_setup

# Only n1 holds the model (n2 and n3 see an empty tmpfs over its directory) and n1's packets
# to the worker services (TCP 7948) go through a 1 Mbit/s bucket, so the shares it streams take
# seconds and the page shows the instance loading part-way; the rest is not held up.
. "$HERE/throttle.sh"
throttle_dport "$(ns_of 1)" "csp$TAG-1" 7948 1mbit
mkdir -p "$WORK/only-n1"
cp "$MODEL" "$WORK/only-n1/"
MODEL="$WORK/only-n1/$(basename "$MODEL")"
MODELS_DIR="$WORK/only-n1"
HIDE[2]="$MODELS_DIR"
HIDE[3]="$MODELS_DIR"
for i in $(seq 1 $N); do start_node "$i"; done

mkdir -p "$ARTIFACTS"
rm -f "$ARTIFACTS"/*.png  # only this run's screenshots
status=0
DASHBOARD_URL="http://$SUBNET.1:8080/" DASHBOARD_KEY="$API_KEY" DASHBOARD_MODEL="$MODEL" \
  DASHBOARD_VICTIM="n3" DASHBOARD_VICTIM_PID="${PIDS[3]}" DASHBOARD_ARTIFACTS="$ARTIFACTS" CHROMIUM="$CHROMIUM" \
  node "$HERE/dashboard_test.mjs" || status=$?
if [ "$status" -ne 0 ]; then
  for f in "$WORK"/*.log; do echo "--- $f"; tail -25 "$f"; done
  exit "$status"
fi
echo "dashboard_netns_test: PASS (screenshots in $ARTIFACTS)"
