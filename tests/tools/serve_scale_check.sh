#!/usr/bin/env bash
# The page of `carapace serve` on a session of 10,000 turns (serve_scale_check.js),
# in Debian's Chromium, headless: the trace and the events answer within 1 s,
# the trace is collapsed as `carapace trace show` collapses it, its filter and
# the events' filter work, the activity feed holds the log's retries on load,
# and long text wraps between words.
#   serve_scale_check.sh CARAPACE_BIN PROJECT_DIR
#   TURNS=N (10000)   LIMIT_MS=N (1000)
# Exit 77 (skipped) when node, chromium or the tests' npm packages are missing.
set -euo pipefail
bin=$1 project=$2
turns=${TURNS:-10000}
. "$project/tests/tools/browser_prereqs.sh"
dir=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
home=$dir/home
start=$(date +%s)
"$bin" --home "$home" log synth --session big --turns "$turns" >/dev/null
# What the command line shows of it: the lines naming a span or standing for
# several (every line starting with its #handle but the events' "· " lines).
"$bin" --home "$home" trace show big >"$dir/show.txt"
cli_rows=$(awk '/^#/ && !/^#[^ ]+ +· / { n++ } END { print n + 0 }' "$dir/show.txt")
"$bin" --home "$home" trace show big --json >"$dir/show.json"
echo "serve_scale_check: $turns turns written and shown by the CLI in $(($(date +%s) - start)) s ($cli_rows lines of spans)"

"$bin" --home "$home" serve --read-only --port 0 >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
url=""
for _ in $(seq 1 600); do
  url=$(head -n 1 "$dir/serve.out" 2>/dev/null | sed -n 's/^carapace serve: listening on \(http:[^ ]*\).*$/\1/p')
  [ -n "$url" ] && break
  if ! kill -0 "$server" 2>/dev/null; then echo "carapace serve exited:"; cat "$dir/serve.err"; exit 1; fi
  sleep 0.1
done
if [ -z "$url" ]; then echo "carapace serve printed no URL in 60 s:"; cat "$dir/serve.out" "$dir/serve.err"; exit 1; fi

node "$project/tests/tools/serve_scale_check.js" "$modules" "$url" --session big --cli-rows "$cli_rows" \
  --trace-json "$dir/show.json" --limit-ms "${LIMIT_MS:-1000}"
