#!/usr/bin/env bash
# The main job from a fresh Debian 12 machine: installs packages, builds the release preset,
# and runs a local 3-process cluster (tensor parallel: each process holds a third of every
# layer, joined by all-reduces over TCP) that tells a story with the built-in demo model
# (stories260K, a real tiny Llama trained on children's stories), or runs the GGUF named as
# the first argument. The plan of who holds what goes to stderr first, the stats line last.
#   scripts/run.sh                                  # a story from the demo model, 3 ranks
#   scripts/run.sh path/to/model.gguf "Hello" -n 64 # your model and prompt (more run options)
#   RANKS=1 scripts/run.sh                          # one process
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target cohort >/dev/null

model="${1:-models/stories260K.gguf}"
prompt="${2:-Once upon a time}"
shift $(( $# > 2 ? 2 : $# ))
ranks="${RANKS:-3}"
dist=()
[ "$ranks" -gt 1 ] && dist=(--local-ranks "$ranks" --layout tp)
exec build/release/bin/cohort -v run -m "$model" -p "$prompt" -n 200 --temp 0 "${dist[@]}" "$@"
