#!/usr/bin/env bash
# Installs what Carapace needs on Debian 12 (only the packages that are
# missing), builds it in build/, then runs the main job or the test suite.
#
#   scripts/bootstrap.sh demo    build the carapace command only, then run the demo
#   scripts/bootstrap.sh test    build, then run every test (CTest)
#   scripts/bootstrap.sh build   build only
#
# Safe to run again: it installs nothing that is already there and the build
# is incremental. Needs root or sudo only when a package is missing.
set -euo pipefail

cd "$(dirname "$0")/.."
task="${1:-build}"
case "$task" in
  demo | test | build) ;;
  *) echo "usage: scripts/bootstrap.sh demo|test|build" >&2; exit 2 ;;
esac

# Debian packages, and why each is here (the README says the same). The
# demo needs the first list only; the tests, benchmarks and fuzz targets the
# second as well.
packages=(
  build-essential cmake pkg-config ccache  # the toolchain; ccache speeds up rebuilds
  libcaf-dev            # the actor framework (CAF 0.17.6), its io middleman and TLS module for nodes
  libssl-dev            # OpenSSL: mutual TLS between nodes, and `carapace node certs`
  librocksdb-dev        # the event log's storage engine
  libxxhash-dev         # XXH3-128 state hashes and digests
  libre2-dev            # regular expressions users write (redaction, blocked commands, hook matchers), in linear time
  nlohmann-json3-dev    # JSON rendering and --json output
  libsimdjson-dev       # the model streams' events, parsed at the speed they arrive (one per token)
  libspdlog-dev         # structured logs
  libcli11-dev          # the command line
  libboost-dev          # Boost.Beast and Asio: the HTTP and WebSocket server of carapace serve
  libcurl4-openssl-dev  # HTTP for the openai and anthropic providers
  libabsl-dev           # time zones for schedules: abseil's cctz over the system's tz database
  libmimalloc-dev       # the carapace program's allocator: the fold and trace views allocate per field
)
if [ "$task" != demo ]; then
  packages+=(
    libboost-test-dev     # the test framework
    libsqlite3-dev        # the SQLite peer in the benchmark
    chromium              # the real browser the web view and HTML export tests drive
    clang libclang-rt-14-dev  # the fuzz targets (scripts/fuzz.sh): libFuzzer comes with clang only
    faketime              # a schedule host's clock set to any time (schedule_host_test)
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Outside programs the integration tests run against (MCP reference servers,
# OpenTelemetry's OTLP definitions, a browser driver), pinned by
# tests/node/package-lock.json. Installed only where Node and npm are present
# (and not for the demo); the tests that need them are skipped otherwise.
if [ "$task" != demo ] && command -v npm > /dev/null && command -v node > /dev/null; then
  if [ ! -f tests/node/node_modules/.package-lock.json ] ||
     ! cmp -s tests/node/package-lock.json tests/node/node_modules/.carapace-lock; then
    echo "== installing the tests' npm packages (tests/node, from the lock file)"
    npm ci --prefix tests/node --no-audit --no-fund --ignore-scripts --loglevel=error
    cp tests/node/package-lock.json tests/node/node_modules/.carapace-lock
  fi
fi

jobs="$(nproc 2>/dev/null || echo 2)"
if [ "$task" = demo ]; then
  # The command alone, what the demo runs, at -O1: a first build a third
  # shorter than at -O3 (-O0 saves no more); the tests and benchmarks are
  # built by `test`, at -O3, with warnings as errors.
  echo "== building the carapace command (build/, -O1, -j$jobs)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
    -DCARAPACE_PROGRAM_ONLY=ON -DCARAPACE_WERROR=OFF > /dev/null
  cmake --build build -j "$jobs" --target carapace
else
  echo "== building (build/, Release, -j$jobs)"
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O3 -DNDEBUG" \
    -DCARAPACE_PROGRAM_ONLY=OFF -DCARAPACE_WERROR=ON > /dev/null
  cmake --build build -j "$jobs"
fi

case "$task" in
  demo)
    echo "== demo"
    exec build/tools/carapace demo
    ;;
  test)
    echo "== tests"
    cd build
    # The long variants (label "slow") run with: ctest -L slow
    exec ctest --output-on-failure -j "$jobs" -LE slow
    ;;
esac
