#!/usr/bin/env bash
# The main job, on the embedded default (RocksDB in a temporary home, no
# network): write a realistic synthetic session through the event log, show
# it, list it, and verify it. The runtime's `carapace demo` replaces this once
# agent sessions run.
set -euo pipefail
cd "$(dirname "$0")/.."
carapace=build/tools/carapace
home="$(mktemp -d -t carapace-demo-XXXXXX)"
run() {
  echo
  echo "\$ carapace $*"
  "$carapace" --home "$home" "$@"
}
run log synth --session demo --turns 4 --tool-calls 2 --seed 7
run log show demo
run sessions
run verify
echo
echo "The demo's data is in $home; look again with:"
echo "  $carapace --home $home log show demo --json"
