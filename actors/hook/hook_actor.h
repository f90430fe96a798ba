// The hook actor: runs the hooks that match a HookInput and resolves their
// decisions (actors/hook/hooks.h). C++ hooks run inline; when a command hook
// matches, all of that input's hooks run in a detached helper actor, so no
// scheduler thread waits on a child process. (A fault plan's delay or hang
// of a C++ hook does sleep inline.)
#pragma once

#include <memory>

#include "actors/caf_types.h"
#include "actors/hook/hook_registry.h"

namespace carapace {

// `faults` (may be null) is asked at the hook point before each hook runs.
HookActor spawn_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                           std::shared_ptr<FaultInjector> faults = nullptr);

}  // namespace carapace
