// The events the session loop records from what other actors answered: the
// faults a fault plan injected into a reply, and the hooks' decisions and
// failures. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/fault_note.h"
#include "actors/hook/hooks.h"
#include "events/events.h"

namespace carapace {

// fault.injected for each note (a crash leaves none).
std::vector<EventBody> fault_events(const std::vector<FaultNote>& notes, uint64_t turn);

// The faults, then one hook.decided per decision and per failure ("failed").
std::vector<EventBody> decided_events(const HookInput& in, const HookVerdict& verdict);

}  // namespace carapace
