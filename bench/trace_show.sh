#!/usr/bin/env bash
# trace_show.sh: how long does `carapace trace show` take on a long session?
#   bench/trace_show.sh CARAPACE_BIN [TURNS (10000)]
#
# One `carapace log synth --turns TURNS` writes a session (two tool calls a
# turn, with retries, failed calls and context trims among them). Then, best
# of 3:
# - `trace show` with the spans built from the log (no collector ran);
# - `trace show` with the spans the collector stored (`collector --once`
#   first), the path of a home a collector follows;
# - `trace show --full`, every span on a line, from the store.
# Baseline, in the same run: `verify` of the session (every event read,
# decoded and folded, checkpoints re-checked), the least any view of every
# event costs; and `sessions --limit 1`, the process and opening the home.
# Prints one line per figure, then one JSON object.
set -euo pipefail
bin=$(readlink -f "$1")
turns=${2:-10000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/best_ms.sh
source "$(dirname "$(readlink -f "$0")")/best_ms.sh"

home="$dir/home"
"$bin" --home "$home" log synth --session long --turns "$turns" > /dev/null
echo "trace_show: wrote a session of $turns turns" >&2
open_ms=$(best_ms "$bin" --home "$home" sessions --limit 1)
verify_ms=$(best_ms "$bin" --home "$home" verify long)
log_ms=$(best_ms "$bin" --home "$home" trace show long)
lines=$("$bin" --home "$home" trace show long | wc -l)
"$bin" --home "$home" collector --once > /dev/null
store_ms=$(best_ms "$bin" --home "$home" trace show long)
full_ms=$(best_ms "$bin" --home "$home" trace show long --full)
full_lines=$("$bin" --home "$home" trace show long --full | wc -l)
printf 'trace_show: %-36s %6d ms\n' "sessions --limit 1 (opening the home)" "$open_ms"
printf 'trace_show: %-36s %6d ms\n' "verify (every event folded)" "$verify_ms"
printf 'trace_show: %-36s %6d ms  %d lines\n' "trace show, spans from the log" "$log_ms" "$lines"
printf 'trace_show: %-36s %6d ms\n' "trace show, spans from the store" "$store_ms"
printf 'trace_show: %-36s %6d ms  %d lines\n' "trace show --full, from the store" "$full_ms" "$full_lines"
echo "{\"turns\":$turns,\"open_ms\":$open_ms,\"verify_ms\":$verify_ms,\"show_log_ms\":$log_ms,\"show_lines\":$lines,\"show_store_ms\":$store_ms,\"full_store_ms\":$full_ms,\"full_lines\":$full_lines}"
