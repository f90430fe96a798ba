#!/usr/bin/env bash
# Every shipped scenario run with `carapace run`, exported as OTLP/JSON (with
# and without --with-content, one session and all at once), and checked by
# OpenTelemetry's own definitions of the protocol (otlp_check.js).
#   otlp_check.sh CARAPACE_BIN PROJECT_DIR
# Exit 77 (skipped) when node or the tests' npm packages are missing.
set -euo pipefail
bin=$1 project=$2
modules=$project/tests/node/node_modules
if ! command -v node >/dev/null; then echo "SKIP: node is not installed (scripts/bootstrap.sh installs it)"; exit 77; fi
if [ ! -f "$modules/@opentelemetry/otlp-transformer/build/src/generated/root.js" ]; then
  echo "SKIP: $modules has no @opentelemetry/otlp-transformer (scripts/bootstrap.sh runs npm ci)"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
n=0
for scenario in "$project"/examples/scenarios/*.json; do
  name=$(basename "$scenario" .json)
  mkdir -p "$dir/ws-$name"
  "$bin" --home "$dir/home" run "Do the task" --scenario "$scenario" --workspace "$dir/ws-$name" --session "$name" \
    >"$dir/run-$name.out" 2>&1 || { cat "$dir/run-$name.out"; exit 1; }
  spans=$("$bin" --home "$dir/home" trace show "$name" --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).data.spans.length))')
  "$bin" --home "$dir/home" trace export "$name" --format otlp -o "$dir/$name.otlp.json" >/dev/null
  node "$project/tests/tools/otlp_check.js" "$modules" "$dir/$name.otlp.json" --spans "$spans"
  "$bin" --home "$dir/home" trace export "$name" --format otlp --with-content -o "$dir/$name.content.json" >/dev/null
  node "$project/tests/tools/otlp_check.js" "$modules" "$dir/$name.content.json" --spans "$spans" --content
  n=$((n + 1))
done
"$bin" --home "$dir/home" trace export --since 1h --format otlp -o "$dir/all.json" >/dev/null
node "$project/tests/tools/otlp_check.js" "$modules" "$dir/all.json"
echo "otlp_check: $n scenarios checked"
