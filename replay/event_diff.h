// Comparing a replayed event with the recorded one (replay/replayer.h).
//
// Every field is compared except the few that differ between any two runs
// of the same session, whatever the code does:
//   every event       ts_us (when it was written)
//   llm.requested     body_ref (a replay captures no bodies)
//   llm.responded     latency_ms, body_ref
//   llm.failed        latency_ms, body_ref
//   tool.completed    duration_ms
//   session.resumed   pid, host
//   approval.requested requested_at_us, expires_at_us (expires_after_ms is compared)
// Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "events/events.h"

namespace carapace {

struct FieldDiff {
  std::string field;     // "type" when the event types differ
  std::string expected;  // as JSON; "" when the field is absent
  std::string actual;
};

// Whether `field` of an event of wire type `type` is left out of the comparison.
bool replay_ignores(std::string_view type, std::string_view field);

// The fields in which `actual` differs from `expected`; empty if they match.
// Events of different types differ in "type" alone.
std::vector<FieldDiff> diff_events(const Event& expected, const Event& actual);

// One line: "seq 12 tool.completed {"call_id":"c1",...}" (long values cut).
std::string describe_event(const Event& e, size_t max_chars = 300);

}  // namespace carapace
