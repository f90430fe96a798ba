#!/usr/bin/env bash
# The page of `carapace serve` in Debian's Chromium, headless (serve_check.js):
# a home with the quickstart session, a fork of it, and one whose tool name is hostile
# markup, `carapace serve --port 0` over it, and a session started while the
# page is open. serve_check.js stops this server near the end and starts
# another on its port to see the page reconnect.
#   serve_check.sh CARAPACE_BIN PROJECT_DIR
#   SCREENSHOT_DIR=docs serve_check.sh ...   also writes serve-sessions.png and serve-trace.png there
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
mkdir -p "$dir/ws" "$dir/ws2" "$dir/ws3"
home=$dir/home
# The lines of `trace show` naming a span or standing for several (the events' say "· ").
cli_rows() {
  "$bin" --home "$home" trace show "$1" | awk '/^#/ && !/^#[^ ]+ +· / { n++ } END { print n + 0 }'
}
span_count() {
  "$bin" --home "$home" trace show "$1" --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.spans.length))'
}

# The quickstart session, and one whose tool name is markup that would run if the page used it as HTML.
"$bin" --home "$home" run "Write a note" --scenario "$project/examples/scenarios/quickstart.json" \
  --workspace "$dir/ws" --session q >/dev/null 2>&1
"$bin" --home "$home" fork q --at-turn 1 --session qf --scenario "$project/examples/scenarios/quickstart.json" >/dev/null 2>&1
hostile='<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'
cat >"$dir/hostile.json" <<JSON
{"replies": [
  {"text": "Calling.", "tool_calls": [{"name": "$(printf '%s' "$hostile" | sed 's/"/\\"/g')", "args": {}}],
   "usage": {"input": 100, "output": 10, "cache_read": 300, "cache_write": 20}},
  {"text": "Done.", "usage": {"input": 50, "output": 5, "cache_read": 330}}
]}
JSON
"$bin" --home "$home" run "Go" --scenario "$dir/hostile.json" --workspace "$dir/ws2" --session h >/dev/null 2>&1

# The session started while the page is open: slow answers and a rate limit with a 4 s Retry-After.
cat >"$dir/live.json" <<'JSON'
{"description": "Takes a few seconds: slow answers and a rate limit the session waits out.",
 "replies": [
  {"text": "Looking first.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 1500},
  {"error": {"status": 429, "retry_after_ms": 4000, "message": "rate limited, wait"}},
  {"text": "Checking once more.", "tool_calls": [{"name": "list_dir", "args": {"path": "."}}], "latency_ms": 1500},
  {"text": "Done, live.", "latency_ms": 1500}
 ]}
JSON

"$bin" --home "$home" serve --read-only --port 0 >"$dir/serve.out" 2>"$dir/serve.err" &
server=$!
url=""
for _ in $(seq 1 100); do
  url=$(head -n 1 "$dir/serve.out" 2>/dev/null | sed -n 's/^carapace serve: listening on \(http:[^ ]*\).*$/\1/p')
  [ -n "$url" ] && break
  if ! kill -0 "$server" 2>/dev/null; then echo "carapace serve exited:"; cat "$dir/serve.err"; exit 1; fi
  sleep 0.1
done
if [ -z "$url" ]; then echo "carapace serve printed no URL in 10 s:"; cat "$dir/serve.out" "$dir/serve.err"; exit 1; fi

node "$project/tests/tools/serve_check.js" "$modules" "$url" \
  --bin "$bin" --home "$home" --workspace "$dir/ws3" --live-scenario "$dir/live.json" \
  --spans-q "$(span_count q)" --rows-q "$(cli_rows q)" --spans-h "$(span_count h)" --rows-h "$(cli_rows h)" --hostile "$hostile" --serve-pid "$server" \
  ${shots:+--screenshots "$shots"}
