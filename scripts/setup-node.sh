#!/usr/bin/env bash
# Installs the node packages the tests use (the official `openai` client, pinned in
# package-lock.json) into node_modules at the repository root. Idempotent: does nothing when
# node_modules already matches the lock file.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if ! command -v npm >/dev/null; then
  echo "setup-node: npm not found; the node server tests will not run" >&2
  exit 0
fi
# npm writes node_modules/.package-lock.json on every install: newer than the lock means done.
if [ node_modules/.package-lock.json -nt package-lock.json ]; then
  exit 0
fi
npm ci --no-audit --no-fund --loglevel=error
