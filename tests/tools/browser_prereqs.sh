# Sourced by the browser checks (html_check.sh, serve_check.sh) with
# $project set: sets $modules (the tests' npm packages) and exits 77
# (skipped) when node, Debian's chromium or playwright-core is missing.
modules=$project/tests/node/node_modules
chromium=${CHROMIUM:-/usr/bin/chromium}
if ! command -v node >/dev/null; then echo "SKIP: node is not installed (scripts/bootstrap.sh installs it)"; exit 77; fi
if [ ! -x "$chromium" ]; then echo "SKIP: no $chromium (scripts/bootstrap.sh installs Debian's chromium)"; exit 77; fi
if [ ! -f "$modules/playwright-core/package.json" ]; then
  echo "SKIP: $modules has no playwright-core (scripts/bootstrap.sh runs npm ci)"; exit 77
fi
