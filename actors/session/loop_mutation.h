// LoopMutation: deliberate defects in a session's loop, for tests that prove
// the torture runner's invariants catch a broken loop. Never set outside
// tests. Defined apart from the session actor so that the embedding API
// (runtime/runtime.h) names it without including CAF.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace carapace {

enum class LoopMutation : uint8_t {
  kNone = 0,
  kIgnoreRecordedStop,  // a resumed session ignores a stop decision recorded before the crash
  kBufferedToolIntent,  // a side-effecting tool runs before its tool.requested is durable
};
std::string_view loop_mutation_name(LoopMutation m);
std::optional<LoopMutation> loop_mutation_from_name(std::string_view name);

}  // namespace carapace
