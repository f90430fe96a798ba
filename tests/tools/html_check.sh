#!/usr/bin/env bash
# The HTML export opened in Debian's Chromium, headless, offline
# (html_check.js): a shipped scenario's run, with and without content, and a
# run whose tool name is hostile markup.
#   html_check.sh CARAPACE_BIN PROJECT_DIR
# Exit 77 (skipped) when node, chromium or the tests' npm packages are missing.
set -euo pipefail
bin=$1 project=$2
. "$project/tests/tools/browser_prereqs.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/ws" "$dir/ws2"
# What `trace show` shows of a session: its lines naming a span or standing for
# several (each starts with its #handle; the events' lines say "· ").
cli_rows() {
  "$bin" --home "$dir/home" trace show "$1" | awk '/^#/ && !/^#[^ ]+ +· / { n++ } END { print n + 0 }'
}
"$bin" --home "$dir/home" run "Write a note" --scenario "$project/examples/scenarios/quickstart.json" \
  --workspace "$dir/ws" --session q >/dev/null 2>&1
"$bin" --home "$dir/home" trace export q --format html -o "$dir/q.html" >/dev/null
node "$project/tests/tools/html_check.js" "$modules" "$dir/q.html" 11 --rows "$(cli_rows q)" \
  --click "llm attempt 1" --nth 1 --expect http_status --expect 429 --expect "rate limited, slow down" ${SCREENSHOT:+--screenshot "$SCREENSHOT"}
"$bin" --home "$dir/home" trace export q --format html --with-content -o "$dir/qc.html" >/dev/null
node "$project/tests/tools/html_check.js" "$modules" "$dir/qc.html" 11 --rows "$(cli_rows q)" \
  --click "tool shell" --expect "Carapace was here." --expect "wc -c notes/summary.txt"
hostile='<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'
cat >"$dir/hostile.json" <<JSON
{"replies": [
  {"text": "Calling.", "tool_calls": [{"name": "$(printf '%s' "$hostile" | sed 's/"/\\"/g')", "args": {}}]},
  {"text": "Done."}
]}
JSON
"$bin" --home "$dir/home" run "Go" --scenario "$dir/hostile.json" --workspace "$dir/ws2" --session h >/dev/null 2>&1
spans=$("$bin" --home "$dir/home" trace show h --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.spans.length))')
"$bin" --home "$dir/home" trace export h --format html --with-content -o "$dir/h.html" >/dev/null
node "$project/tests/tools/html_check.js" "$modules" "$dir/h.html" "$spans" --rows "$(cli_rows h)" --hostile "$hostile" \
  --click "tool $hostile" --expect "$hostile"
