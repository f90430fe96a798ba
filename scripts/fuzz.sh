#!/usr/bin/env bash
# Builds the fuzz targets with clang and libFuzzer in build-fuzz/ (every
# library they read through instrumented, with AddressSanitizer and
# UndefinedBehaviorSanitizer), then runs each for SECONDS, one after the
# other, under nice -n 19, and prints per target: executions, executions a
# second, coverage (cov: edges, ft: features), corpus units added, crashes.
#
#   scripts/fuzz.sh SECONDS [TARGET...]    every target, or those named
#   (targets: record fold sse mcp hook scenario config fault_plan bundle cache; docs/fuzzing.md)
#
# A run starts from the target's seeds (tests/fuzz/corpus/TARGET/, only
# read) and what earlier runs found (build-fuzz/corpus/TARGET/, where new
# units go). A crash is written to build-fuzz/crashes/TARGET/ with its input;
# the build directory is outside the tracked tree. Exits 1 if any target
# crashed. Installs nothing: clang and libclang-rt-14-dev come with
# scripts/bootstrap.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
all_targets=(record fold sse mcp hook scenario config fault_plan bundle cache)
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET...]   (targets: ${all_targets[*]})" >&2
  exit 2
fi
seconds="$1"
shift
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then targets=("${all_targets[@]}"); fi
for t in "${targets[@]}"; do
  if [ ! -d "tests/fuzz/corpus/$t" ]; then
    echo "scripts/fuzz.sh: no target \"$t\" (targets: ${all_targets[*]})" >&2
    exit 2
  fi
done
if ! command -v clang++ > /dev/null; then
  echo "scripts/fuzz.sh: clang++ is missing: scripts/bootstrap.sh build installs it" >&2
  exit 1
fi

out=build-fuzz
jobs="$(nproc 2>/dev/null || echo 2)"
echo "== building the fuzz targets ($out/, clang, libFuzzer + ASan + UBSan, -j$jobs)"
CC=clang CXX=clang++ cmake -S . -B "$out" -DCARAPACE_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
nice -n 19 cmake --build "$out" -j "$jobs" --target fuzz_targets > "$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  exit 1
}

summary=()
crashed=0
for t in "${targets[@]}"; do
  mkdir -p "$out/corpus/$t" "$out/crashes/$t" "$out/logs"
  log="$out/logs/$t.log"
  before=$(find "$out/crashes/$t" -type f | wc -l)
  echo "== $t: ${seconds} s"
  status=0
  # -max_len: the longest input tried; seeds are smaller. -timeout: an input
  # that takes this long is reported (as a crash) rather than waited out.
  nice -n 19 "$out/tests/fuzz/${t}_fuzz" "$out/corpus/$t" "tests/fuzz/corpus/$t" \
    -max_total_time="$seconds" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
    -artifact_prefix="$out/crashes/$t/" -print_final_stats=1 > "$log" 2>&1 || status=$?
  after=$(find "$out/crashes/$t" -type f | wc -l)
  stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  last=$(grep -E '^#[0-9]+[[:space:]].*cov: ' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<< "$last")
  new_crashes=$((after - before))
  if [ "$status" -ne 0 ] || [ "$new_crashes" -gt 0 ]; then
    crashed=1
    echo "   CRASHED (exit $status): see $log and $out/crashes/$t/"
    grep -E 'ERROR: |runtime error|fuzz invariant|Test unit written' "$log" | head -5 | sed 's/^/   /'
  fi
  summary+=("$(printf '%-11s %6s %12s %9s %7s %8s %12s %8s %7s' "$t" "$seconds" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$(stat new_units_added)" "$new_crashes")")
done

echo
printf '%-11s %6s %12s %9s %7s %8s %12s %8s %7s\n' target seconds executions exec/s cov ft corpus new crashes
printf '%s\n' "${summary[@]}"
exit "$crashed"
