#!/usr/bin/env bash
# many_sessions.sh: is a home with very many sessions still quick to ask?
#   bench/many_sessions.sh CARAPACE_BIN [SESSIONS (100000)]
#
# One `carapace log synth --sessions SESSIONS --spread 30d` writes that many
# one-turn sessions, dated back evenly over 30 days (so about 0.14% of them
# fall in the last hour). Then `sessions --limit 20`, `sessions --since 1h`,
# `trace stats --since 1h` and `log show` of one session are timed (best of
# 3). Baseline, in the same run: the same commands on a home with one such
# session, and `carapace --help` (the process alone: start-up and dynamic
# linking, no home opened). Prints one line per figure, then one JSON object.
set -euo pipefail
bin=$(readlink -f "$1")
sessions=${2:-100000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/best_ms.sh
source "$(dirname "$(readlink -f "$0")")/best_ms.sh"

mkdir -m 700 "$dir/one" "$dir/many"
"$bin" --home "$dir/one" log synth --turns 1 --tool-calls 1 --session s-1 > /dev/null
t0=$(date +%s%N)
"$bin" --home "$dir/many" log synth --sessions "$sessions" --spread 30d --turns 1 --tool-calls 1 --session s > /dev/null
write_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "many_sessions: wrote $sessions sessions in $write_ms ms" >&2
help_ms=$(best_ms "$bin" --help)
printf 'many_sessions: %-22s %6d ms (the process alone)\n' "carapace --help" "$help_ms"
json="{\"sessions\":$sessions,\"write_ms\":$write_ms,\"help_ms\":$help_ms"
for what in "sessions --limit 20" "sessions --since 1h" "trace stats --since 1h" "log show s-1"; do
  # shellcheck disable=SC2086
  one=$(best_ms "$bin" --home "$dir/one" $what)
  # shellcheck disable=SC2086
  many=$(best_ms "$bin" --home "$dir/many" $what)
  printf 'many_sessions: %-22s one session %5d ms | %d sessions %5d ms\n' "$what" "$one" "$sessions" "$many"
  json+=",\"$what\":{\"one\":$one,\"many\":$many}"
done
echo "$json}"
