// The replay's tool actor: answers every tool call with its recorded
// outcome (actors/replay_tape.h). No tool runs and no process starts: a
// replay has no side effect.
#pragma once

#include <memory>

#include "actors/caf_types.h"
#include "actors/replay_tape.h"

namespace carapace {

ToolActor spawn_replay_tool_actor(caf::actor_system& system, std::shared_ptr<const ReplayTape> tape);

}  // namespace carapace
