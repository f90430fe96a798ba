// The tool actors: a supervisor that routes each call to a worker actor per
// tool, starting workers on first use and restarting any that dies.
//
// A worker runs a non-blocking tool (a quick C++ function) inline; a blocking
// tool (shell, files, anything marked blocking) runs in a detached helper
// actor per call, so calls of many sessions proceed at once and no scheduler
// thread waits on a process or a disk. A function that throws gives an error
// result. If a worker dies, the supervisor answers its calls in flight with
// an error result saying so and starts a new worker; the sessions go on.
#pragma once

#include <memory>

#include "actors/caf_types.h"
#include "actors/tool_registry.h"

namespace carapace {

ToolSupervisorActor spawn_tool_supervisor(caf::actor_system& system, std::shared_ptr<ToolRegistry> tools);

// Runs `tool` on `invocation` in the calling thread, timing it and turning
// exceptions into error results.
ToolOutcome run_tool(const ToolDefinition& tool, const ToolInvocation& invocation);

}  // namespace carapace
