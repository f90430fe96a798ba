// Context trimming: which messages leave the conversation when it outgrows
// its budget.
//
// The first message (the task) always stays. Past `max_chars`, whole turns
// leave from the oldest on until three quarters of the budget remain (so that
// trimming does not recur every turn); a tool result never stays without the
// assistant message that asked for it. The plan is recorded as a
// context.trimmed event, which the fold applies. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "events/events.h"
#include "events/session_state.h"

namespace carapace {

// Characters the messages put in a request: texts and tool call arguments.
uint64_t context_chars(const std::vector<Message>& messages);

// The trim that brings `messages` back under budget, or nothing when they fit
// (or when nothing can leave without breaking a turn apart).
std::optional<ContextTrimmed> plan_trim(const std::vector<Message>& messages, uint64_t max_chars);

}  // namespace carapace
