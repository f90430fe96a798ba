#!/usr/bin/env bash
# The schedules view of a hosting `carapace serve` in Debian's Chromium, headless
# (serve_schedule_check.js): a schedule made from the page's form, listed with its next fire; one
# made through the API appearing by the socket's push; Run now, its run completed in the
# schedule's last runs and in the session list; Pause, Resume; the API's refusals in the form (a
# bad cron: 400 naming the hour field; a name in use: 409); a second, read-only server on the same
# home listing the schedules with no control; Remove.
#   serve_schedule_check.sh CARAPACE_BIN PROJECT_DIR
#   SCREENSHOT_DIR=DIR serve_schedule_check.sh ...   also writes serve-schedules{,-read-only}.png there
# Exit 77 (skipped) when node, chromium or the tests' npm packages are missing.
set -euo pipefail
bin=$1 project=$2
. "$project/tests/tools/browser_prereqs.sh"
shots=""
if [ -n "${SCREENSHOT_DIR:-}" ]; then mkdir -p "$SCREENSHOT_DIR"; shots=$(cd "$SCREENSHOT_DIR" && pwd); fi
dir=$(mktemp -d)
server=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT
home=$dir/home
mkdir -m 700 "$home"

# Every run of a schedule is a session of its own, so each plays the first reply: an answer slow
# enough (3 s) for the page to show the run going.
cat >"$dir/scenario.json" <<'JSON'
{"description": "serve_schedule_check: each run answers once, in 3 s.",
 "replies": [
  {"text": "The notes are tidy.", "latency_ms": 3000},
  {"text": "A spare answer.", "latency_ms": 300}
 ]}
JSON

"$bin" --home "$home" serve --port 0 --scenario "$dir/scenario.json" >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
url=""
for _ in $(seq 1 100); do
  url=$(head -n 1 "$dir/serve.out" 2>/dev/null | sed -n 's/^carapace serve: listening on \(http:[^ ]*\).*$/\1/p')
  [ -n "$url" ] && break
  if ! kill -0 "$server" 2>/dev/null; then echo "carapace serve exited:"; cat "$dir/serve.err"; exit 1; fi
  sleep 0.1
done
if [ -z "$url" ]; then echo "carapace serve printed no URL in 10 s:"; cat "$dir/serve.out" "$dir/serve.err"; exit 1; fi
for _ in $(seq 1 50); do
  grep -q "^carapace serve: \(hosting\|read-only\)" "$dir/serve.out" && break
  sleep 0.1
done
if ! grep -q "^carapace serve: hosting" "$dir/serve.out"; then
  echo "serve_schedule_check: expected carapace serve to host the home (a line 'carapace serve: hosting: …'):"
  cat "$dir/serve.out" "$dir/serve.err"
  exit 1
fi

status=0
node "$project/tests/tools/serve_schedule_check.js" "$modules" "$url" --bin "$bin" --home "$home" \
  ${shots:+--screenshots "$shots"} || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- carapace serve's output:"
  cat "$dir/serve.out" "$dir/serve.err" | tail -n 40
fi
exit "$status"
