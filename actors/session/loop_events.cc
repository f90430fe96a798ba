#include "actors/session/loop_events.h"

#include <string>

namespace carapace {

std::vector<EventBody> fault_events(const std::vector<FaultNote>& notes, uint64_t turn) {
  std::vector<EventBody> events;
  for (const auto& n : notes) {
    events.emplace_back(FaultInjected{.point = n.point, .action = n.action, .detail = n.detail, .turn = turn});
  }
  return events;
}

std::vector<EventBody> decided_events(const HookInput& in, const HookVerdict& verdict) {
  std::vector<EventBody> events = fault_events(verdict.faults, in.turn);
  const std::string event(hook_event_name(in.event));
  for (const auto& d : verdict.decisions) {
    events.emplace_back(HookDecided{.hook_event = event,
                                    .hook_name = d.hook_name,
                                    .decision = std::string(decision_name(d.decision)),
                                    .reason = d.reason,
                                    .modified_args = d.modified_args,
                                    .tool_call_id = in.tool_call_id,
                                    .message = d.message});
  }
  for (const auto& f : verdict.failures) {
    events.emplace_back(HookDecided{.hook_event = event,
                                    .hook_name = f.hook_name,
                                    .decision = "failed",
                                    .reason = f.error,
                                    .tool_call_id = in.tool_call_id});
  }
  return events;
}

}  // namespace carapace
