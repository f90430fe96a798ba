// Aggregates over the spans of one or many sessions, for `carapace trace
// stats` (docs/trace.md): tokens (cache included), cost, model latency
// percentiles, tool usage and error rates, retries; in total and grouped by
// model, tool, session or day. A pure function.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/collector/span.h"

namespace carapace {

struct StatsOptions {
  std::string group_by;  // "", model, tool, session, day
  int64_t since_us = 0;  // only spans that started then or later
  // Offset of local time from UTC, in seconds, for grouping by day.
  int64_t utc_offset_s = 0;
};

// {"totals": {...}, "groups": [{"key": ..., ...}, ...]} where each aggregate
// has sessions, turns, model_calls, retries, tokens_in, tokens_out,
// cache_read, cache_write, cache_hit_ratio (cache_read over all input:
// tokens_in + cache_read + cache_write), cost_usd, latency_ms {p50, p95, p99, max} (of the
// model calls), tool_calls, tool_errors, tool_error_rate, tools {name:
// {calls, errors, error_rate, output_bytes, p50_ms, p95_ms, p99_ms, max_ms}}.
// A tool's latency runs from its request to its result in the log (to a
// tenth of a millisecond). Grouped by tool, a group is that tool's entry
// with "sessions" and "key": model calls are no tool's.
nlohmann::json trace_stats(const std::vector<std::vector<Span>>& traces, const StatsOptions& options);

// Of all the input a provider took in (uncached, read from its prompt
// cache, written to it), the share read from the cache; 0 with no input.
double cache_hit_ratio(uint64_t tokens_in, uint64_t cache_read, uint64_t cache_write);

// The nearest-rank percentile `p` (0-100) of `values` (sorted here); 0 if empty.
uint64_t percentile(std::vector<uint64_t> values, double p);

}  // namespace carapace
