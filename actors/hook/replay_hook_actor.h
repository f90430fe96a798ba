// The replay's hook actor: the hooks matching an input, as they are
// registered now, each answered the way a replay (replay/replayer.h) needs:
//   a C++ hook runs for real: it is the embedding program's code under test;
//   a command hook gives its recorded decision (actors/replay_tape.h), or, if
//   the recording has none (a hook added since), runs for real, so that the
//   replay shows what the new hook changes.
// Decisions combine by the usual rules (actors/hook/hooks.h).
#pragma once

#include <memory>

#include "actors/caf_types.h"
#include "actors/hook/hook_registry.h"
#include "actors/replay_tape.h"

namespace carapace {

HookVerdict replay_hooks(const HookRegistry& hooks, const ReplayTape& tape, const HookInput& input);

HookActor spawn_replay_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                                  std::shared_ptr<const ReplayTape> tape);

}  // namespace carapace
