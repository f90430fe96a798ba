// FuzzCheck: what a fuzz target asserts about the code it feeds, an invariant
// that must hold for every input (a decoded record re-encodes, a parsed
// configuration reads back).
//
// Unlike assert() it stays in Release builds, where the corpus tests run. A
// broken invariant prints what broke and aborts: libFuzzer saves the input
// as a crash, CTest reports the test failed. Thread-safe.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace carapace::fuzz {

inline void check(bool holds, const char* what) {
  if (holds) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace carapace::fuzz
