#!/usr/bin/env bash
# The main job from a fresh Debian 12 machine: installs packages, builds the release preset,
# and generates text with the built-in demo model (stories260K, a real tiny Llama trained on
# children's stories) or with the GGUF named as the first argument.
#   scripts/run.sh                              # a story from the demo model
#   scripts/run.sh path/to/model.gguf "Hello"   # your model and prompt
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target cohort >/dev/null

model="${1:-models/stories260K.gguf}"
prompt="${2:-Once upon a time}"
shift $(( $# > 2 ? 2 : $# ))
exec build/release/bin/cohort run -m "$model" -p "$prompt" -n 200 --temp 0 "$@"
