#!/usr/bin/env bash
# The main job, on the embedded default (RocksDB in a temporary home, the
# scripted provider, real tools in a temporary workspace, no network): an
# agent session that lists its workspace, rides out a rate limit, writes a
# file and checks it with a shell command; then its log, and a verify.
set -euo pipefail
cd "$(dirname "$0")/.."
carapace="$PWD/build/tools/carapace"
home="$(mktemp -d -t carapace-demo-XXXXXX)"
workspace="$home/workspace"
mkdir -p "$workspace"
echo "A workspace for the Carapace demo." > "$workspace/README.txt"
run() {
  echo
  echo "\$ carapace $*"
  "$carapace" --home "$home" "$@"
}
run run "Write a short note in the workspace and check it" --session demo \
  --scenario examples/scenarios/quickstart.json --workspace "$workspace"
run log show demo
run verify
echo
echo "The demo's data is in $home; look again with:"
echo "  $carapace --home $home log show demo --json"
