#!/usr/bin/env bash
# serve_idle_cpu.sh: the CPU an idle `carapace serve` uses.
#   [SESSIONS=N] bench/serve_idle_cpu.sh CARAPACE_BIN [SECONDS (60)] [SERVE_ARGS...]
# A fresh home with N synthetic sessions of 5 turns (default 2) and one of
# 50, `carapace serve --port 0` over it with no client and no writer, then
# the server's utime + stime (/proc/PID/stat) over SECONDS after a 2 s
# settle. Prints one line:
#   idle cpu: X.XX% of one core (T ticks of 1/HZ s in S s)
set -euo pipefail
bin=$1 seconds=${2:-60}
shift $(( $# < 2 ? $# : 2 ))
dir=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
for i in $(seq 1 "${SESSIONS:-2}"); do "$bin" --home "$dir/home" log synth --session "s$i" --turns 5 >/dev/null; done
"$bin" --home "$dir/home" log synth --session b --turns 50 >/dev/null
"$bin" --home "$dir/home" serve --port 0 "$@" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
for _ in $(seq 1 100); do grep -q "listening on" "$dir/serve.out" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$dir/serve.out" || { echo "carapace serve did not start:"; cat "$dir/serve.err"; exit 1; }
sleep 2
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks)
sleep "$seconds"
t1=$(ticks)
awk -v d=$((t1 - t0)) -v hz="$hz" -v s="$seconds" \
  'BEGIN { printf "idle cpu: %.2f%% of one core (%d ticks of 1/%d s in %d s)\n", 100 * d / hz / s, d, hz, s }'
