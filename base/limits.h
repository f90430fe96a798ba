// Limits on input from outside: the fixed bounds every reader of a model's
// reply, a server's message, a scenario, a config, a fault plan or a bundle
// applies before it trusts what it read (docs/config.md, "Limits").
//
// These are the bounds that no configuration should raise: each is well
// below what this process can take (the stack, the memory of a small
// machine) and far above what any honest input needs. The bounds a user may
// tune (response sizes, stream times) are configuration keys instead.
#pragma once

#include <cstddef>
#include <cstdint>

namespace carapace::limits {

// JSON nesting depth (arrays and objects) of any JSON text read from outside
// or from a log. serde_json's default; a recursive reader of this depth uses
// a few tens of KiB of stack.
inline constexpr int kJsonDepth = 128;

// Files named by the configuration or the command line, read whole.
inline constexpr uint64_t kConfigFileBytes = 1ull << 20;      // config.json
inline constexpr uint64_t kPromptFileBytes = 1ull << 20;      // identity and custom instructions files
inline constexpr uint64_t kFaultPlanBytes = 1ull << 20;       // --faults
inline constexpr uint64_t kScenarioFileBytes = 64ull << 20;   // --scenario, provider.scenario
inline constexpr uint64_t kHookOutputBytes = 1ull << 20;      // a command hook's decision on stdout

}  // namespace carapace::limits
