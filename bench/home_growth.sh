#!/usr/bin/env bash
# home_growth.sh: does a home stay fast after many short commands?
#   bench/home_growth.sh CARAPACE_BIN [COMMANDS (10000)]
#
# COMMANDS short commands against one home, as the CLI is used, each its own
# process and writer: odd ones `carapace log synth --turns 1`, even ones
# `carapace run` of a two-reply scenario on the scripted provider (a list_dir
# call, then the answer). Then a 5-turn session is written, and `log show` of
# it, `sessions --limit 20`, `sessions`, `verify --all` and `trace stats
# --since 24h` are timed (best of 3), and the table files of every database
# of the home counted. Baseline,
# in the same run: the same 5-turn session alone in a fresh home. Prints one
# line per figure, then one JSON object.
set -euo pipefail
bin=$(readlink -f "$1")
commands=${2:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/best_ms.sh
source "$(dirname "$(readlink -f "$0")")/best_ms.sh"

mkdir -m 700 "$dir/fresh" "$dir/used" "$dir/ws"
cat > "$dir/scenario.json" <<'JSON'
{"model": "scripted-1", "replies": [
  {"text": "Looking.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}]},
  {"text": "Nothing here."}]}
JSON
"$bin" --home "$dir/fresh" log synth --turns 5 --session small > /dev/null
start=$(date +%s)
for i in $(seq 1 "$commands"); do
  if (( i % 2 )); then
    "$bin" --home "$dir/used" log synth --turns 1 --session "c$i" > /dev/null
  else
    "$bin" --home "$dir/used" run "look" --scenario "$dir/scenario.json" --workspace "$dir/ws" --session "r$i" > /dev/null 2>&1
  fi
  if (( i % 500 == 0 )); then
    echo "home_growth: $i commands ($(( $(date +%s) - start )) s, $(find "$dir/used" -name '*.sst' | wc -l) table files)" >&2
  fi
done
took=$(( $(date +%s) - start ))
"$bin" --home "$dir/used" log synth --turns 5 --session small > /dev/null
# Every database of the home: the log, the trace store, the bodies.
files_used=$(find "$dir/used" -name '*.sst' | wc -l)
files_fresh=$(find "$dir/fresh" -name '*.sst' | wc -l)
json="{\"commands\":$commands,\"seconds\":$took,\"files\":{\"fresh\":$files_fresh,\"used\":$files_used}"
for what in "log show small" "sessions --limit 20" "sessions" "verify --all" "trace stats --since 24h"; do
  # shellcheck disable=SC2086
  fresh=$(best_ms "$bin" --home "$dir/fresh" $what)
  # shellcheck disable=SC2086
  used=$(best_ms "$bin" --home "$dir/used" $what)
  printf 'home_growth: %-24s fresh home %5d ms | after %d commands %5d ms\n' "$what" "$fresh" "$commands" "$used"
  json+=",\"$what\":{\"fresh\":$fresh,\"used\":$used}"
done
printf 'home_growth: %-24s fresh home %5d    | after %d commands %5d\n' "table files" "$files_fresh" "$commands" "$files_used"
echo "$json}"
