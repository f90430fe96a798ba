// The planner: given a schedule's state and the time, what is due — fires,
// skips, an automatic pause — and when to look again. Pure (the runner
// appends what it says and starts the sessions; tests give it any clock),
// so the rules of docs/schedules.md are all here:
//
// - Due times come from the cron expression, after the last one handled.
//   Each fires at its nominal time plus a jitter of 0..jitter_ms, the same
//   for the same (schedule, nominal time) on every host and every restart.
// - A due time whose fire is late by more than the catch-up window (the
//   host was down) is skipped "catchup_window"; within it, it fires
//   ("catchup" when more than 10 s late).
// - Overlap, when a run of the schedule is still going: skip (the due time
//   is skipped "overlap"), buffer_one (the first is deferred — recorded as
//   skipped "buffered" — and fires when the run ends; more are skipped),
//   allow (it fires anyway).
// - pause_after_failures runs failed in a row: the schedule pauses itself.
// - Paused: nothing is due; resuming looks forward from then.
//
// Skips of one reason in a row are one event with a count.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "events/events.h"
#include "schedule/cron.h"
#include "schedule/schedule_state.h"

namespace carapace::schedule {

// The fire's delay past its nominal time: 0..jitter_ms, from (name, nominal).
uint64_t jitter_for(std::string_view name, int64_t nominal_us, uint64_t jitter_ms);

struct Plan {
  // In the order to append them: ScheduleFired, ScheduleSkipped, SchedulePaused.
  std::vector<EventBody> events;
  // When a due time comes next (its fire time); nullopt: nothing is coming
  // (paused, removed, or a run to wait for first).
  std::optional<int64_t> wake_at_us;
};

// What is due at `now_us`. At most `max_fires` fires (the rest stay due).
Plan plan_due(const ScheduleState& state, const CronExpression& cron, const TimeZone& zone, int64_t now_us,
              size_t max_fires = 64);

// A person's trigger: a run now (nominal: `now_us` to the second), or why
// not (conflict: a run is going and the overlap is not allow; the schedule
// is removed).
Status plan_trigger(const ScheduleState& state, int64_t now_us, const std::string& who, ScheduleFired* out);

// A backfill of the due times in [from_us, to_us] (at most `max_runs`, else
// invalid_argument): each fires (trigger "backfill"), except those whose
// session is already in the home (`exists`), skipped "exists".
Status plan_backfill(const ScheduleState& state, const CronExpression& cron, const TimeZone& zone, int64_t from_us,
                     int64_t to_us, int64_t now_us, const std::string& who,
                     const std::function<bool(const std::string&)>& exists, size_t max_runs, Plan* out);

}  // namespace carapace::schedule
