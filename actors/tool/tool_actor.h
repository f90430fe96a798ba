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
#include "actors/tool/tool_registry.h"

namespace carapace {

// `faults` (may be null) is asked at tool.before_exec and tool.after_exec.
ToolSupervisorActor spawn_tool_supervisor(caf::actor_system& system, std::shared_ptr<ToolRegistry> tools,
                                          std::shared_ptr<FaultInjector> faults = nullptr);

// Runs `tool` on `invocation` in the calling thread, timing it, turning
// exceptions into error results, and carrying out injected faults.
ToolOutcome run_tool(const ToolDefinition& tool, const ToolInvocation& invocation,
                     FaultInjector* faults = nullptr);

}  // namespace carapace
