// The session keeper: watches session actors, and reports the ones that fail
// (an exception, a kill) so that the runtime can recover them from their
// log, as SPEC §3 asks. A session actor that stops normally (it closed
// itself once idle, or its runtime is shutting down) is reported as closed.
#pragma once

#include <functional>
#include <string>

#include "actors/caf_types.h"

namespace carapace {

using keep_atom = caf::atom_constant<caf::atom("keep")>;

using SessionKeeperActor = caf::typed_actor<caf::reacts_to<keep_atom, SessionActor, std::string>>;

// `on_failure(id, reason)` runs on the keeper's thread: keep it quick (hand
// the recovery to another thread). `on_closed(id, session)` runs there too
// when a session actor quits normally (it closed itself once idle).
SessionKeeperActor spawn_session_keeper(caf::actor_system& system,
                                        std::function<void(const std::string&, const caf::error&)> on_failure,
                                        std::function<void(const std::string&, const caf::actor_addr&)> on_closed);

}  // namespace carapace
