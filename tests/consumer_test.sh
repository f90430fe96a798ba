#!/usr/bin/env bash
# Builds examples/consumer as an outside project would, runs it and checks its
# answer.
#
#   consumer_test.sh installed    <carapace build dir> <carapace source dir> <work dir>
#   consumer_test.sh subdirectory <carapace build dir> <carapace source dir> <work dir>
#   consumer_test.sh subdirectory-compile ...
#
# installed: `cmake --install` into a fresh prefix under <work dir>; the
# public headers must preprocess alone (only the prefix and the system on the
# include path) and pull in no RocksDB, CAF, <regex> or nlohmann/json.hpp;
# the consumer is configured with find_package(carapace) in a separate cmake
# run, and built a second time from the pkg-config file alone.
# subdirectory: the consumer builds Carapace's source tree with add_subdirectory
# (all of the library: minutes without a warm ccache, hence labelled slow);
# subdirectory-compile: the same configuration, compiling app.cc alone.
# In both, the consumer's compile lines must carry none of Carapace's warning
# flags and (add_subdirectory) not its repository root. Inner builds go
# through ccache when there is one.
set -euo pipefail

mode=$1 build=$2 src=$3 work=$4
rm -rf "$work"
mkdir -p "$work"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
scenario="$src/examples/consumer/scenario.json"

fail() {
  echo "consumer_test ($mode): $*" >&2
  exit 1
}

check_run() {  # <program> <name>
  local out="$work/$2.out" err="$work/$2.err"
  "$1" "$work/home-$2" "$scenario" >"$out" 2>"$err" || { cat "$out" "$err"; fail "$2 exited with $?"; }
  cat "$out" "$err"
  grep -q '^answer: 6 x 7 = 42\. Multiplying by zero was refused\.$' "$out" || fail "$2: no answer"
  grep -q '^hook no-zero: deny a zero is not allowed' "$out" || fail "$2: the hook did not deny"
  grep -q 'session.completed' "$out" || fail "$2: no session.completed event"
  grep -q '^session .*: replay identical after [0-9]* events$' "$out" || fail "$2: the replay was not identical"
  grep -q '^carapace [0-9]*\.[0-9]*\.[0-9]* (headers [0-9.]*)$' "$out" || fail "$2: no version line"
  # Only the program's own lines on stdout: the library logs to its sink.
  if grep -vE '^(  +[0-9]+ [a-z_.]+|hook .*|session .*|answer: .*|carapace [0-9.]+ \(headers [0-9.]+\)|library log: .*)$' "$out"; then
    fail "$2: a line on stdout that the program did not print (above)"
  fi
}

check_compile_lines() {  # <consumer build dir>
  local cc="$1/compile_commands.json"
  [[ -f $cc ]] || fail "no $cc"
  local line
  line=$(grep '"command"' "$cc" | grep 'app\.cc' || true)
  [[ -n $line ]] || fail "app.cc is not in $cc"
  for flag in -Werror -Wshadow -Wpedantic; do
    if grep -q -- "$flag" <<<"$line"; then fail "Carapace's $flag reached the consumer: $line"; fi
  done
  if grep -qE -- "(-I|-isystem )$src( |\$)" <<<"$line"; then
    fail "Carapace's repository root is on the consumer's include path: $line"
  fi
}

case $mode in
  installed)
    prefix="$work/prefix"
    cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install failed"; }
    for f in include/carapace/runtime.h lib/cmake/carapace/carapaceConfig.cmake \
             lib/cmake/carapace/carapaceConfigVersion.cmake lib/cmake/carapace/FindCAF.cmake lib/pkgconfig/carapace.pc; do
      [[ -f $prefix/$f ]] || fail "not installed: $f"
    done
    # The public header alone, and what it pulls in.
    echo '#include <carapace/runtime.h>' | g++ -std=c++20 \
      -I "$prefix/include" -x c++ -fsyntax-only -H - 2>"$work/includes.txt" >/dev/null \
      || { cat "$work/includes.txt"; fail "<carapace/runtime.h> does not compile from the installed tree alone"; }
    if grep -E '(/rocksdb/|/caf/|/regex$|nlohmann/json\.hpp)' "$work/includes.txt"; then
      fail "<carapace/runtime.h> includes the above"
    fi
    lines=$(echo '#include <carapace/runtime.h>' | g++ -std=c++20 -I "$prefix/include" -x c++ -E - | wc -l)
    echo "g++ -std=c++20 -E <carapace/runtime.h>: $lines lines"

    cmake -S "$src/examples/consumer" -B "$work/app" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}" >"$work/configure.log" 2>&1 \
      || { cat "$work/configure.log"; fail "configuring the consumer failed"; }
    cmake --build "$work/app" -j2 >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the consumer failed"; }
    check_compile_lines "$work/app"
    check_run "$work/app/app" cmake

    # pkg-config, without CMake.
    cxx=(g++)
    if command -v ccache >/dev/null; then cxx=(ccache g++); fi
    read -r -a pc < <(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs carapace) \
      || fail "pkg-config --cflags --libs carapace failed"
    "${cxx[@]}" -std=c++20 -O1 "$src/examples/consumer/app.cc" -o "$work/app-pc" "${pc[@]}" >"$work/pc.log" 2>&1 \
      || { cat "$work/pc.log"; fail "building the consumer with pkg-config failed: ${pc[*]}"; }
    check_run "$work/app-pc" pkg-config
    ;;
  subdirectory | subdirectory-compile)
    cmake -S "$src/examples/consumer" -B "$work/app" -DCMAKE_BUILD_TYPE=Release -DCARAPACE_SOURCE_DIR="$src" \
      -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}" >"$work/configure.log" 2>&1 \
      || { cat "$work/configure.log"; fail "configuring the consumer failed"; }
    check_compile_lines "$work/app"
    if [[ $mode == subdirectory-compile ]]; then
      make -C "$work/app" app.cc.o >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "compiling app.cc failed"; }
    else
      cmake --build "$work/app" -j2 --target app >"$work/build.log" 2>&1 \
        || { tail -50 "$work/build.log"; fail "building the consumer failed"; }
      check_run "$work/app/app" subdirectory
    fi
    ;;
  *)
    fail "unknown mode (installed, subdirectory or subdirectory-compile)"
    ;;
esac
echo "consumer_test ($mode): ok"
