// The allocator the process runs on. The carapace program and the
// benchmarks link mimalloc (CMake's CARAPACE_MALLOC, README "Dependencies"):
// the fold and the trace views allocate a string or a map node for most
// fields they keep, and glibc's malloc spent a quarter of `trace show`'s
// time (bench/README.md). The libraries do not link it: a program that
// embeds them keeps its own allocator.
#pragma once

#include <string>

namespace carapace {

// "mimalloc 2.0.9" when mimalloc serves this process's malloc, else "system".
std::string allocator_in_use();

}  // namespace carapace
