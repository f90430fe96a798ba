// Reading what waits for a person (docs/approvals.md) from the log, without
// a runtime: the approval requests of each unfinished session's open turn,
// by the fold's rules (note_approval), from the events after its last
// checkpoint. Used by Runtime::list_approvals and `carapace approvals`.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "events/session_state.h"
#include "runtime/session_options.h"
#include "storage/event_log.h"

namespace carapace {

// The approval requests of session `id`'s open turn, decided or not (none
// for a session that finished).
Status open_approvals(const EventLog& log, const std::string& id, std::vector<PendingApproval>* out);

// The requests still waiting, oldest first: session `id`'s, or ("") every
// unfinished session's in the home. not_found for an unknown `id`.
Status waiting_approvals(const EventLog& log, const std::string& id, std::vector<Approval>* out);

}  // namespace carapace
