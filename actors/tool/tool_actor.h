// The tool actors: a supervisor that routes each call to a worker actor per
// tool, starting workers on first use and restarting any that dies.
//
// A worker runs a non-blocking tool (a quick C++ function) inline; a blocking
// tool (shell, files, anything marked blocking) runs in a detached helper
// actor per call, so calls of many sessions proceed at once and no scheduler
// thread waits on a process or a disk. A function that throws gives an error
// result. If a worker dies, the supervisor answers its calls in flight with
// an error result saying so and starts a new worker; the sessions go on.
//
// Every call has a time-out (ToolInvocation::timeout_ms): when it passes the
// supervisor trips the call's stop token (ToolContext::stop); a result within
// kToolGraceMs after that is recorded as timed out; past it the session gets
// a timed-out result saying the call was abandoned, and a non-blocking
// tool's worker, still inside the call, is replaced for later calls.
#pragma once

#include <memory>

#include "actors/call_tracker.h"
#include "actors/caf_types.h"
#include "actors/tool/tool_registry.h"

namespace carapace {

// `faults` (may be null) is asked at tool.before_exec and tool.after_exec;
// `tracker` (null: one of its own) holds the calls' stop tokens and counts
// the user code running.
ToolSupervisorActor spawn_tool_supervisor(caf::actor_system& system, std::shared_ptr<ToolRegistry> tools,
                                          std::shared_ptr<FaultInjector> faults = nullptr,
                                          std::shared_ptr<CallTracker> tracker = nullptr);

// Runs `tool` on `invocation` in the calling thread, timing it, turning
// exceptions into error results, and carrying out injected faults. The
// context's stop token is `tracker`'s for the call (none without one).
ToolOutcome run_tool(const ToolDefinition& tool, const ToolInvocation& invocation,
                     FaultInjector* faults = nullptr, CallTracker* tracker = nullptr);

// The result text of a call an injected error fault failed, before it ran
// or after (the tool router says the same for calls sent to nodes).
std::string injected_tool_failure(const std::string& tool, const Fault& fault, bool after_running);

}  // namespace carapace
