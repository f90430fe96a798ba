// The provider actors: a supervisor that owns one worker for a Provider and
// restarts it when it dies.
//
// The worker answers each ProviderRequest: a non-blocking provider (the
// scripted one) answers at once and the worker holds the reply back for its
// simulated latency with a delayed message (virtual time in tests); a
// blocking provider (HTTP) runs in a detached helper actor per call, so no
// scheduler thread ever waits on the network. Streamed deltas go to the
// request's sink. If the worker dies, the supervisor answers every request it
// had in flight with a transient transport failure (so the session's retry
// policy applies) and starts a new worker; the sessions go on.
#pragma once

#include <memory>

#include "actors/caf_types.h"
#include "actors/provider/provider.h"

namespace carapace {

// `faults` (may be null) is asked at provider.before_request and
// provider.after_response.
ProviderSupervisorActor spawn_provider_supervisor(caf::actor_system& system,
                                                  std::shared_ptr<Provider> provider,
                                                  std::shared_ptr<FaultInjector> faults = nullptr);

}  // namespace carapace
