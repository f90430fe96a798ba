#!/usr/bin/env bash
# home_growth.sh: does a home stay fast after many short commands?
#   bench/home_growth.sh CARAPACE_BIN [COMMANDS (2000)]
#
# COMMANDS `carapace log synth --turns 1` runs against one home (each a
# short writer, as the CLI is used), then `log show` of a 5-turn session,
# `sessions` and `verify --all` are timed (best of 3) and the table files
# counted. Baseline, in the same run: the same 5-turn session alone in a
# fresh home. Prints one line per figure, then one JSON object.
set -euo pipefail
bin=$(readlink -f "$1")
commands=${2:-2000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/best_ms.sh
source "$(dirname "$(readlink -f "$0")")/best_ms.sh"

mkdir -m 700 "$dir/fresh" "$dir/used"
"$bin" --home "$dir/fresh" log synth --turns 5 --session small > /dev/null
start=$(date +%s)
for i in $(seq 1 "$commands"); do
  "$bin" --home "$dir/used" log synth --turns 1 --session "c$i" > /dev/null
  if (( i % 500 == 0 )); then echo "home_growth: $i commands ($(( $(date +%s) - start )) s)" >&2; fi
done
"$bin" --home "$dir/used" log synth --turns 5 --session small > /dev/null
files_used=$(find "$dir/used/log" -name '*.sst' | wc -l)
files_fresh=$(find "$dir/fresh/log" -name '*.sst' | wc -l)
declare -A fresh used
for what in "log show small" "sessions" "verify --all"; do
  # shellcheck disable=SC2086
  fresh[$what]=$(best_ms "$bin" --home "$dir/fresh" $what)
  # shellcheck disable=SC2086
  used[$what]=$(best_ms "$bin" --home "$dir/used" $what)
  printf 'home_growth: %-14s fresh home %5d ms | after %d commands %5d ms\n' "$what" "${fresh[$what]}" "$commands" "${used[$what]}"
done
printf 'home_growth: table files     fresh home %5d    | after %d commands %5d\n' "$files_fresh" "$commands" "$files_used"
printf '{"commands":%d,"files":{"fresh":%d,"used":%d},"log_show_ms":{"fresh":%d,"used":%d},"sessions_ms":{"fresh":%d,"used":%d},"verify_ms":{"fresh":%d,"used":%d}}\n' \
  "$commands" "$files_fresh" "$files_used" "${fresh[log show small]}" "${used[log show small]}" \
  "${fresh[sessions]}" "${used[sessions]}" "${fresh[verify --all]}" "${used[verify --all]}"
