#include "schedule/schedule_state.h"

#include <absl/time/time.h>

#include <algorithm>
#include <cctype>

namespace carapace::schedule {

std::string stream_id(std::string_view name) { return std::string(kStreamPrefix) + std::string(name); }

Status validate_name(std::string_view name) {
  auto bad = [&](const std::string& why) {
    return Status::invalid_argument("the schedule name '" + std::string(name.substr(0, 60)) + "' " + why +
                                    ": use 1 to 48 of a-z, 0-9, '_' and '-', starting with a letter or digit");
  };
  if (name.empty()) return bad("is empty");
  if (name.size() > 48) return bad("is longer than 48 characters");
  if (!std::islower(static_cast<unsigned char>(name.front())) && !std::isdigit(static_cast<unsigned char>(name.front()))) {
    return bad("does not start with a letter or digit");
  }
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' ||
          c == '-')) {
      return bad("has a character other than a-z, 0-9, '_' and '-'");
    }
  }
  return Status();
}

std::string run_session_id(std::string_view name, int64_t nominal_us, std::string_view trigger) {
  std::string stamp =
      absl::FormatTime("%Y%m%d-%H%M%S", absl::FromUnixMicros(nominal_us), absl::UTCTimeZone());
  std::string id = std::string(name) + "-" + stamp;
  if (trigger == "trigger") id += "-trigger";
  return id;
}

namespace {

Status bad(const Event& e, const std::string& what) {
  return Status::corruption("schedule event seq " + std::to_string(e.seq) + " (" + std::string(e.type_name()) +
                            "): " + what);
}

void end_run(ScheduleState& s, ScheduleRun run) {
  s.recent.push_back(std::move(run));
  while (s.recent.size() > 20) s.recent.pop_front();
}

}  // namespace

Status apply_schedule_event(ScheduleState& s, const Event& e) {
  if (e.seq <= s.last_seq) return bad(e, "seq does not advance past " + std::to_string(s.last_seq));
  if (std::holds_alternative<UnknownEvent>(e.body)) {
    s.last_seq = e.seq;
    return Status();
  }
  const auto* defined = get_if<ScheduleDefined>(e);
  if (!s.defined && defined == nullptr) return bad(e, "comes before the schedule's schedule.defined");
  if (defined != nullptr) {
    if (!s.name.empty() && defined->name != s.name) {
      return bad(e, "defines schedule '" + defined->name + "' in the stream of '" + s.name + "'");
    }
    const bool first = !s.defined || s.removed;
    s.name = defined->name;
    s.defined = true;
    s.removed = false;
    s.definition = *defined;
    s.defined_at_us = e.ts_us;
    // A new or changed definition looks forward from now: due times of an
    // older cron are not caught up under the new one.
    s.handled_through_us = std::max(s.handled_through_us, e.ts_us);
    if (first) {
      s.paused = defined->paused;
      s.pause_reason = defined->paused ? "created paused" : "";
      s.pause_source = defined->source;
      s.consecutive_failures = 0;
    }
  } else if (get_if<ScheduleRemoved>(e) != nullptr) {
    s.removed = true;
  } else if (const auto* p = get_if<SchedulePaused>(e)) {
    s.paused = true;
    s.pause_reason = p->reason;
    s.pause_source = p->source;
  } else if (get_if<ScheduleResumed>(e) != nullptr) {
    s.paused = false;
    s.pause_reason.clear();
    s.pause_source.clear();
    s.consecutive_failures = 0;
    s.buffered_nominal_us = 0;
    // The time it stood paused is not caught up.
    s.handled_through_us = std::max(s.handled_through_us, e.ts_us);
  } else if (const auto* f = get_if<ScheduleFired>(e)) {
    for (const auto& r : s.open) {
      if (r.session == f->session) return bad(e, "fires session " + f->session + " a second time");
    }
    s.open.push_back(ScheduleRun{.session = f->session,
                                 .nominal_us = f->nominal_us,
                                 .actual_us = f->actual_us,
                                 .trigger = f->trigger});
    ++s.fired;
    // Fires of the cron itself move the mark; a trigger or a backfill does not.
    if (f->trigger == "schedule" || f->trigger == "catchup" || f->trigger == "buffered") {
      s.handled_through_us = std::max(s.handled_through_us, f->nominal_us);
    }
    if (f->trigger == "buffered") s.buffered_nominal_us = 0;
  } else if (const auto* k = get_if<ScheduleSkipped>(e)) {
    if (k->reason != "exists") s.handled_through_us = std::max(s.handled_through_us, k->last_nominal_us);
    if (k->reason == "buffered") {
      s.buffered_nominal_us = k->nominal_us;  // deferred, not dropped
    } else {
      s.skipped += k->count;
      s.last_skip = *k;
    }
  } else if (const auto* r = get_if<ScheduleRunEnded>(e)) {
    auto it = std::find_if(s.open.begin(), s.open.end(), [&](const ScheduleRun& o) { return o.session == r->session; });
    if (it == s.open.end()) return bad(e, "ends run " + r->session + ", which is not open");
    ScheduleRun run = *it;
    s.open.erase(it);
    run.ended = true;
    run.outcome = r->outcome;
    run.error = r->error;
    run.duration_ms = r->duration_ms;
    if (r->outcome == "failed") {
      ++s.consecutive_failures;
    } else if (r->outcome == "completed") {
      s.consecutive_failures = 0;
    }
    end_run(s, std::move(run));
  } else {
    return bad(e, "a session's event in a schedule's stream");
  }
  s.last_seq = e.seq;
  return Status();
}

Status fold_schedule(std::string_view name, const std::vector<Event>& events, ScheduleState* out) {
  ScheduleState s;
  s.name = std::string(name);
  for (const auto& e : events) CARAPACE_RETURN_IF_ERROR(apply_schedule_event(s, e));
  *out = std::move(s);
  return Status();
}

}  // namespace carapace::schedule
