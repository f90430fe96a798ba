// ScheduleState: what a schedule is and has done, folded from its own stream
// ("schedule:NAME", events 22-28 of events/events.h). Pure: the same events
// give the same state, so a restarted host knows exactly which due times were
// handled, which runs are still open and how many failed in a row.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "events/events.h"

namespace carapace::schedule {

// The stream of schedule NAME: "schedule:NAME". Session ids may not start
// with "schedule:" (keys.h allows ':'; start_session refuses this prefix).
inline constexpr std::string_view kStreamPrefix = "schedule:";
std::string stream_id(std::string_view name);

// A schedule name: 1 to 48 of [a-z0-9_-], starting with a letter or digit.
Status validate_name(std::string_view name);

// The session a fire starts: NAME-YYYYMMDD-HHMMSS of the nominal time (UTC);
// a trigger's ends in -trigger. The same (schedule, nominal time) always
// gives the same id, so a fire retried after a crash finds its session.
std::string run_session_id(std::string_view name, int64_t nominal_us, std::string_view trigger);

struct ScheduleRun {
  std::string session;
  int64_t nominal_us = 0;
  int64_t actual_us = 0;
  std::string trigger;
  bool ended = false;
  std::string outcome;  // once ended: completed, failed, stopped
  std::string error;
  uint64_t duration_ms = 0;
};

struct ScheduleState {
  std::string name;
  bool defined = false;
  bool removed = false;
  ScheduleDefined definition;
  int64_t defined_at_us = 0;   // the latest definition's time
  bool paused = false;
  std::string pause_reason;
  std::string pause_source;
  // Due times up to here were fired or skipped (or came before the
  // definition, or while paused): the next one the cron names after it is due.
  int64_t handled_through_us = 0;
  uint64_t consecutive_failures = 0;
  uint64_t fired = 0;    // runs started, every trigger
  uint64_t skipped = 0;  // due times skipped
  std::vector<ScheduleRun> open;     // fired, not ended: what the overlap rule counts
  int64_t buffered_nominal_us = 0;   // buffer_one: a due time deferred until the open run ends; 0: none
  std::deque<ScheduleRun> recent;    // the last 20 ended runs, oldest first
  ScheduleSkipped last_skip;         // count 0: none
  uint64_t last_seq = 0;
};

// Applies one event of the schedule's stream; a session's event, a seq that
// does not advance, or anything before schedule.defined is an error naming the seq.
Status apply_schedule_event(ScheduleState& state, const Event& event);

Status fold_schedule(std::string_view name, const std::vector<Event>& events, ScheduleState* out);

}  // namespace carapace::schedule
