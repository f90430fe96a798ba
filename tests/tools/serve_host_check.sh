#!/usr/bin/env bash
# The page of a hosting `carapace serve` in Debian's Chromium, headless (serve_host_check.js): a
# session started from the page's form parks on an approval (the home's config asks before
# write_file), is approved from its card and answers, streaming; a message from the chat box; a
# second session denied from its card, sent a slow message, stopped, resumed and forked; a fork
# whose model asks a question, answered from its card; the API's refusals (no token: 401, an
# unknown field: 400); and a second, read-only server on the same home, whose page shows no
# write control.
#   serve_host_check.sh CARAPACE_BIN PROJECT_DIR
#   SCREENSHOT_DIR=DIR serve_host_check.sh ...   also writes serve-host-{approval,chat,list}.png there
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

# Every write_file waits for a person (docs/approvals.md); write_file is among the default tools.
cat >"$home/config.json" <<'JSON'
{"approvals": {"tools": "^write_file$"}}
JSON

# Replies are per session: a session's n-th answered attempt gets the n-th entry
# (docs/scenario-format.md), so every session plays the same list, and a fork goes on
# from the entry after its copied turns. What each session of the check uses:
#   1  the first call: write_file, parks on its approval        (every session started)
#   2  the answer after the decision                             (every session started; a fork at turn 1)
#   3  a slow answer (5 s): the answer to the first message;     (the first session; the second: stopped
#      stopped in its wait and asked again by the resume            in the wait, resumed)
#   4  ask_user: a question for the person                        (the fork of the first at turn 3)
#   5  the answer after it is answered
#   6  a spare
cat >"$dir/scenario.json" <<'JSON'
{"description": "serve_host_check: a write that waits for approval, an answer, a slow answer, a question.",
 "replies": [
  {"text": "I'll write the note first.", "tool_calls": [{"name": "write_file", "args": {"path": "note.txt", "content": "hi"}}],
   "latency_ms": 800},
  {"text": "All done: the note is written.", "latency_ms": 300},
  {"text": "Thinking it over slowly: this answer takes its time to arrive.", "latency_ms": 5000},
  {"text": "One question first.", "tool_calls": [{"name": "ask_user", "args": {"question": "Which colour should the note be?"}}],
   "latency_ms": 300},
  {"text": "Blue it is, then.", "latency_ms": 300},
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
# Its start names its mode on a line of its own, a moment after the URL.
for _ in $(seq 1 50); do
  grep -q "^carapace serve: \(hosting\|read-only\)" "$dir/serve.out" && break
  sleep 0.1
done
if ! grep -q "^carapace serve: hosting" "$dir/serve.out"; then
  echo "serve_host_check: expected carapace serve to host the home (a line 'carapace serve: hosting: …'):"
  cat "$dir/serve.out" "$dir/serve.err"
  exit 1
fi

status=0
node "$project/tests/tools/serve_host_check.js" "$modules" "$url" --bin "$bin" --home "$home" \
  ${shots:+--screenshots "$shots"} || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- carapace serve's output:"
  cat "$dir/serve.out" "$dir/serve.err" | tail -n 40
fi
exit "$status"
