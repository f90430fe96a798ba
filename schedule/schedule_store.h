// Schedules in a home's event log: each one's stream "schedule:NAME" beside
// the sessions' (docs/schedules.md). Reading folds a stream into its state;
// writing appends to it durably (synced: a fire is on disk before its
// session starts). The writer of the home is the only one that appends.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "schedule/schedule_state.h"
#include "storage/event_log.h"

namespace carapace::schedule {

// The names of every schedule in the log, removed ones included, sorted.
Status list_schedules(const EventLog& log, std::vector<std::string>* names);

// The state of schedule `name`; one never defined has defined == false.
Status load_schedule(const EventLog& log, const std::string& name, ScheduleState* out);

// Appends `bodies` to the schedule's stream after state.last_seq, stamped
// `now_us`, synced; then applies them to *state.
Status append_schedule(EventLog& log, ScheduleState* state, std::vector<EventBody> bodies, int64_t now_us);

}  // namespace carapace::schedule
