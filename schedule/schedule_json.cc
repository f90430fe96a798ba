#include "schedule/schedule_json.h"

#include <algorithm>

#include "schedule/schedule_spec.h"

namespace carapace::schedule {

using nlohmann::json;

json run_json(const ScheduleRun& r) {
  json j = {{"session", r.session}, {"nominal", utc_text(r.nominal_us)}, {"fired_at", utc_text(r.actual_us)},
            {"trigger", r.trigger}, {"ended", r.ended}};
  if (r.ended) {
    j["outcome"] = r.outcome;
    j["duration_ms"] = r.duration_ms;
    if (!r.error.empty()) j["error"] = r.error;
  }
  return j;
}

json schedule_json(const ScheduleState& s, const CronExpression& cron, const TimeZone& zone, int64_t now_us,
                   bool full) {
  json j = definition_to_json(s.definition);
  j["name"] = s.name;
  j["removed"] = s.removed;
  j["paused"] = s.paused;
  if (s.paused) j["pause_reason"] = s.pause_reason;
  j["source"] = s.definition.source;
  j["defined_at"] = utc_text(s.defined_at_us);
  j["fired"] = s.fired;
  j["skipped"] = s.skipped;
  j["consecutive_failures"] = s.consecutive_failures;
  json running = json::array();
  for (const auto& r : s.open) running.push_back(run_json(r));
  j["running"] = running;
  if (s.defined && !s.removed && !s.paused) {
    if (auto next = cron.next_after(std::max(s.handled_through_us, now_us), zone)) {
      j["next"] = utc_text(*next);
      j["next_local"] = zone.local_text(*next);
    }
  }
  if (!s.last_skip.reason.empty()) {
    j["last_skip"] = {{"from", utc_text(s.last_skip.nominal_us)},
                      {"to", utc_text(s.last_skip.last_nominal_us)},
                      {"count", s.last_skip.count},
                      {"reason", s.last_skip.reason}};
  }
  json recent = json::array();
  size_t shown = 0;
  for (auto it = s.recent.rbegin(); it != s.recent.rend() && (full || shown < 5); ++it, ++shown) {
    recent.push_back(run_json(*it));
  }
  j["recent"] = recent;
  return j;
}

}  // namespace carapace::schedule
