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
  // context_trimmed, unused_tools, failing_tool, max_turns, crashed;
  // cache_bust, ttl_lapse, provider_miss, cache_off (cache_analyze.h)
  std::string pattern;
  std::string message;
  std::vector<uint64_t> seqs;
  nlohmann::json detail = nullptr;  // what --json adds (a cache bust's region and offsets)
};

struct AnalyzeOptions {
  // The session's writer died with it open after this seq and no run has
  // resumed it yet (tools/trace_load.h attributes it; 0: not crashed).
  uint64_t crashed_after_seq = 0;
  std::string session;  // for the hint of a crash not resumed
};

// Spans a fork copied from its parent are the parent's to answer for:
// skipped, except that a tool the copied turns used counts as used.
std::vector<Finding> analyze_trace(const std::vector<Span>& spans, const AnalyzeOptions& options = {});

}  // namespace carapace
