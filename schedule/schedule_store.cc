#include "schedule/schedule_store.h"

#include <algorithm>

namespace carapace::schedule {

Status list_schedules(const EventLog& log, std::vector<std::string>* names) {
  std::vector<std::string> ids;
  CARAPACE_RETURN_IF_ERROR(log.list_logged_sessions(&ids));
  names->clear();
  for (const auto& id : ids) {
    if (id.rfind(kStreamPrefix, 0) == 0) names->push_back(id.substr(kStreamPrefix.size()));
  }
  std::sort(names->begin(), names->end());
  return Status();
}

Status load_schedule(const EventLog& log, const std::string& name, ScheduleState* out) {
  const std::string stream = stream_id(name);
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log.last_seq(stream, &last));
  std::vector<Event> events;
  if (last > 0) CARAPACE_RETURN_IF_ERROR(log.read(stream, 1, last, &events));
  return fold_schedule(name, events, out);
}

Status append_schedule(EventLog& log, ScheduleState* state, std::vector<EventBody> bodies, int64_t now_us) {
  if (bodies.empty()) return Status();
  std::vector<Event> events;
  uint64_t seq = state->last_seq;
  for (auto& b : bodies) events.push_back(Event{.seq = ++seq, .ts_us = now_us, .body = std::move(b)});
  // Checked against the fold before anything is written.
  ScheduleState next = *state;
  for (const auto& e : events) CARAPACE_RETURN_IF_ERROR(apply_schedule_event(next, e));
  const std::string stream = stream_id(state->name);
  CARAPACE_RETURN_IF_ERROR(
      log.append(AppendRequest{.session = stream, .events = events, .durability = Durability::kSynced}));
  *state = std::move(next);
  return Status();
}

}  // namespace carapace::schedule
