// How a session stands, as Runtime::wait answers it, from its folded state.
#pragma once

#include <cstdint>
#include <string>

#include "actors/messages.h"
#include "events/session_state.h"

namespace carapace {

// `budget`: the session's turn budget (0: not known). A session that has not
// finished and has used it is stopped there: stop_reason "max_turns", no
// final answer, the error saying how to go on.
SessionOutcome outcome_of(const std::string& id, const SessionState& s, uint64_t budget = 0);

}  // namespace carapace
