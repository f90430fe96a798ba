#include "events/event_type.h"

#include <array>

namespace carapace {
namespace {

constexpr std::array<std::string_view, kMaxKnownEventType + 1> kNames = {
    "unknown",           "session.started", "user.message",   "turn.started",     "prompt.assembled",
    "llm.requested",     "llm.failed",      "llm.responded",  "hook.decided",     "tool.requested",
    "tool.completed",    "context.trimmed", "turn.committed", "turn.rolled_back", "session.resumed",
    "session.completed", "session.failed",  "fault.injected",   "session.configured",
    "session.stopped",   "approval.requested", "approval.decided", "schedule.defined",
    "schedule.removed",  "schedule.paused",    "schedule.resumed", "schedule.fired",   "schedule.skipped",
    "schedule.run_ended"};

}  // namespace

std::string_view wire_name(uint16_t type) { return type < kNames.size() ? kNames[type] : kNames[0]; }

std::optional<EventType> event_type_from_name(std::string_view name) {
  for (uint16_t t = 1; t < kNames.size(); ++t) {
    if (kNames[t] == name) return static_cast<EventType>(t);
  }
  return std::nullopt;
}

}  // namespace carapace
