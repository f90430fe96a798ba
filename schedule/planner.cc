#include "schedule/planner.h"

#include <xxhash.h>

#include <algorithm>

#include "schedule/schedule_spec.h"

namespace carapace::schedule {

namespace {

constexpr int64_t kCatchupAfterUs = 10'000'000;  // a fire this late is a catch-up
constexpr uint64_t kMaxDueScan = 100'000;        // due times looked at in one plan

// Skips of one reason in a row become one event.
void add_skip(Plan* plan, int64_t nominal_us, const std::string& reason, const std::string& detail) {
  if (!plan->events.empty()) {
    if (auto* last = std::get_if<ScheduleSkipped>(&plan->events.back()); last && last->reason == reason &&
                                                                          reason != "buffered") {
      last->last_nominal_us = nominal_us;
      ++last->count;
      return;
    }
  }
  plan->events.emplace_back(ScheduleSkipped{
      .nominal_us = nominal_us, .last_nominal_us = nominal_us, .count = 1, .reason = reason, .detail = detail});
}

}  // namespace

uint64_t jitter_for(std::string_view name, int64_t nominal_us, uint64_t jitter_ms) {
  if (jitter_ms == 0) return 0;
  std::string key(name);
  key.push_back('\0');
  key.append(std::to_string(nominal_us));
  return XXH3_64bits(key.data(), key.size()) % (jitter_ms + 1);
}

Plan plan_due(const ScheduleState& s, const CronExpression& cron, const TimeZone& zone, int64_t now_us,
              size_t max_fires) {
  Plan plan;
  if (!s.defined || s.removed || s.paused) return plan;
  const ScheduleDefined& d = s.definition;
  if (d.pause_after_failures > 0 && s.consecutive_failures >= d.pause_after_failures) {
    plan.events.emplace_back(SchedulePaused{
        .reason = std::to_string(s.consecutive_failures) + " runs in a row failed (pause_after_failures " +
                  std::to_string(d.pause_after_failures) + ")",
        .source = "schedule",
        .who = "schedule " + s.name});
    return plan;
  }
  size_t open = s.open.size();
  size_t fires = 0;
  int64_t buffered = s.buffered_nominal_us;
  auto fire = [&](int64_t nominal, int64_t actual, uint64_t jitter, const std::string& trigger) {
    plan.events.emplace_back(ScheduleFired{.nominal_us = nominal,
                                           .actual_us = actual,
                                           .session = run_session_id(s.name, nominal, trigger),
                                           .trigger = trigger,
                                           .jitter_ms = jitter});
    ++open;
    ++fires;
  };
  // A deferred due time goes first, once the run it waited for has ended.
  if (buffered != 0 && open == 0) {
    fire(buffered, now_us, 0, "buffered");
    buffered = 0;
  }
  const int64_t catchup_us = static_cast<int64_t>(std::min<uint64_t>(d.catchup_ms, INT64_MAX / 1000) * 1000);
  int64_t from = s.handled_through_us;
  for (uint64_t scanned = 0; scanned < kMaxDueScan; ++scanned) {
    std::optional<int64_t> next = cron.next_after(from, zone);
    if (!next) break;
    const int64_t nominal = *next;
    const uint64_t jitter = jitter_for(s.name, nominal, d.jitter_ms);
    const int64_t at = nominal + static_cast<int64_t>(jitter) * 1000;
    if (at > now_us) {
      plan.wake_at_us = at;
      break;
    }
    if (fires >= max_fires) {
      plan.wake_at_us = now_us;  // more are due: look again at once
      break;
    }
    from = nominal;
    const int64_t late = now_us - at;
    if (late > catchup_us) {
      add_skip(&plan, nominal, "catchup_window", "missed by more than the catch-up window of " + duration_text(d.catchup_ms));
      continue;
    }
    const std::string trigger = late > kCatchupAfterUs ? "catchup" : "schedule";
    if (open == 0 || d.overlap == "allow") {
      fire(nominal, now_us, jitter, trigger);
    } else if (d.overlap == "buffer_one" && buffered == 0) {
      add_skip(&plan, nominal, "buffered", "fires when the run going now ends");
      buffered = nominal;
    } else {
      add_skip(&plan, nominal, "overlap",
               d.overlap == "buffer_one" ? "a run is going and one is buffered already" : "a run is going");
    }
  }
  return plan;
}

Status plan_trigger(const ScheduleState& s, int64_t now_us, const std::string& who, ScheduleFired* out) {
  if (!s.defined || s.removed) return Status::not_found("no schedule '" + s.name + "'");
  if (!s.open.empty() && s.definition.overlap != "allow") {
    return Status::busy("schedule '" + s.name + "' has a run going (" + s.open.front().session +
                        ") and its overlap is " + s.definition.overlap);
  }
  const int64_t nominal = now_us / 1'000'000 * 1'000'000;
  *out = ScheduleFired{.nominal_us = nominal,
                       .actual_us = now_us,
                       .session = run_session_id(s.name, nominal, "trigger"),
                       .trigger = "trigger",
                       .who = who};
  return Status();
}

Status plan_backfill(const ScheduleState& s, const CronExpression& cron, const TimeZone& zone, int64_t from_us,
                     int64_t to_us, int64_t now_us, const std::string& who,
                     const std::function<bool(const std::string&)>& exists, size_t max_runs, Plan* out) {
  if (!s.defined || s.removed) return Status::not_found("no schedule '" + s.name + "'");
  if (from_us > to_us) return Status::invalid_argument("--from is after --to");
  if (to_us > now_us) return Status::invalid_argument("--to is in the future: a backfill runs due times that passed");
  std::vector<int64_t> due;
  for (std::optional<int64_t> n = cron.next_after(from_us - 1, zone); n && *n <= to_us; n = cron.next_after(*n, zone)) {
    due.push_back(*n);
    if (due.size() > max_runs) {
      return Status::invalid_argument("the range holds more than " + std::to_string(max_runs) +
                                      " due times; backfill a shorter one");
    }
  }
  Plan plan;
  for (int64_t nominal : due) {
    const std::string id = run_session_id(s.name, nominal, "schedule");
    const bool fired_here = std::any_of(s.open.begin(), s.open.end(), [&](const ScheduleRun& r) { return r.session == id; });
    if (fired_here || exists(id)) {
      plan.events.emplace_back(ScheduleSkipped{.nominal_us = nominal,
                                               .last_nominal_us = nominal,
                                               .count = 1,
                                               .reason = "exists",
                                               .detail = "session " + id + " ran already"});
      continue;
    }
    plan.events.emplace_back(ScheduleFired{
        .nominal_us = nominal, .actual_us = now_us, .session = id, .trigger = "backfill", .who = who});
  }
  *out = std::move(plan);
  return Status();
}

}  // namespace carapace::schedule
