// What a replay found (Runtime::replay, replay_session): identical, or the
// first event where the re-run differs from the recording, with the fields
// that differ and the events before it. Plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "events/events.h"
#include "replay/event_diff.h"

namespace carapace {

struct ReplayDivergence {
  uint64_t seq = 0;
  uint64_t turn = 0;
  std::optional<Event> expected;  // none: the replay wrote past the recording's end
  std::optional<Event> actual;    // none: the replay stopped where the recording goes on
  std::vector<FieldDiff> fields;
  std::vector<Event> before;  // the events before it, identical in both
};

struct ReplayReport {
  std::string session;
  uint64_t events = 0;  // recorded events replayed identically
  uint64_t turns = 0;   // turns committed among them
  uint64_t resumes = 0;
  uint64_t history = 0;  // events taken as given (a fork's copied history, the opening)
  std::optional<ReplayDivergence> divergence;
  bool identical() const { return !divergence; }
};

}  // namespace carapace
