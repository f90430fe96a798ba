// What the project's own code (the CLI, tests, benchmarks) may reach inside a
// Runtime and an embedding program may not: the writer's event log. Not
// installed; the public API reads events with Runtime::read_events.
#pragma once

#include "runtime/runtime.h"
#include "storage/event_log.h"

namespace carapace {

struct RuntimeInternals {
  // The runtime's event log (the writer): reading, verifying, listing.
  static EventLog& log(Runtime& runtime);
};

// The runtime's event log (the writer).
inline EventLog& runtime_log(Runtime& runtime) { return RuntimeInternals::log(runtime); }

}  // namespace carapace
