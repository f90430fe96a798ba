// Failure patterns in a trace, for `carapace trace analyze` (docs/trace.md).
// A pure function over one session's spans; each finding names the seqs of
// the events that show it, so `carapace log show <id> --from N` finds them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "actors/collector/span.h"

namespace carapace {

struct Finding {
  // retry_loop, repeated_tool_call, tool_call_without_result, truncated_output,
  // context_trimmed, unused_tools, failing_tool, max_turns, crashed
  std::string pattern;
  std::string message;
  std::vector<uint64_t> seqs;
};

// Spans a fork copied from its parent are the parent's to answer for: skipped.
std::vector<Finding> analyze_trace(const std::vector<Span>& spans);

}  // namespace carapace
