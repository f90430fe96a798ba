// The hook actor: runs the hooks that match a HookInput and resolves their
// decisions (actors/hook/hooks.h). Each matching hook runs in a detached
// helper actor of its own, all at once, so no scheduler thread waits on a
// hook and a slow hook delays only the session that fired it; a hook that
// gives no answer within its time-out is abandoned (a failure; a deny if it
// is fail_closed). The helper of a hook that never returns keeps its thread.
#pragma once

#include <memory>

#include "actors/call_tracker.h"
#include "actors/caf_types.h"
#include "actors/hook/hook_registry.h"

namespace carapace {

// `faults` (may be null) is asked at the hook point before each hook runs;
// `tracker` (null: one of its own) counts the hooks running.
// `inline_cpp_hooks`: C++ hooks run in the actor, one after another, with no
// time-out (deterministic tests on CAF's test coordinator; a fault plan's
// delay or hang of a hook sleeps inline).
HookActor spawn_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                           std::shared_ptr<FaultInjector> faults = nullptr,
                           std::shared_ptr<CallTracker> tracker = nullptr, bool inline_cpp_hooks = false);

}  // namespace carapace
