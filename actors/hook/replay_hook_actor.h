// The replay's hook actor: the hooks matching an input, as they are
// registered now, each answered the way a replay (replay/replayer.h) needs:
//   a C++ hook runs for real: it is the embedding program's code under test;
//   a command hook gives its recorded decision (actors/replay_tape.h); if
//   the recording has none (a hook added since, or one a bundle's forged
//   configuration names) its command is NOT run: it fails with
//   no_recorded_decision(), so the replay writes a hook.decided "failed"
//   the recording lacks, and diverges there.
// Decisions combine by the usual rules (actors/hook/hooks.h). Runs no
// process; thread-safe (the tape is).
#pragma once

#include <memory>
#include <string>

#include "actors/caf_types.h"
#include "actors/hook/hook_registry.h"
#include "actors/replay_tape.h"

namespace carapace {

// "hook NAME has no recorded decision; a replay runs no command".
std::string no_recorded_decision(const std::string& hook_name);

HookVerdict replay_hooks(const HookRegistry& hooks, const ReplayTape& tape, const HookInput& input);

HookActor spawn_replay_hook_actor(caf::actor_system& system, std::shared_ptr<HookRegistry> hooks,
                                  std::shared_ptr<const ReplayTape> tape);

}  // namespace carapace
