// Replay-to-reproduce (SPEC §9): re-run a recorded session through the real
// session loop, with the current code, tools, hooks and configuration, and
// compare every event it writes with the recorded one.
//
// The replay answers from the recording (actors/replay_tape.h): each
// provider attempt gets its recorded response or failure (and the retry
// policy decides again), each tool call its recorded outcome (no process
// runs), each command hook its recorded decision (a C++ hook runs for real:
// it is the code under test; a command hook the recording has no decision
// for is not run, and the replay diverges there). It runs on CAF's deterministic scheduler in virtual time:
// recorded latencies and retry delays cost nothing. It re-enacts what
// happened to the session from outside its loop, at the recorded seq:
// a user message (sent when the session was idle or queued while it ran),
// a crash (the replay's next write is refused where the recorded run
// stopped) and the resume after it, in the recorded mode, and a change of
// configuration recorded by a resume or fork (ReplayOptions::reconfigure).
// A fork starts from its copied history.
//
// It writes only into a scratch log of its own (removed afterwards), never
// into the recorded session; it opens no connection and runs no tool, no
// command hook and no MCP server, whatever the configuration says.
//
// The first event that differs (replay/event_diff.h for the fields left
// out), or one the replay wrote past the recording's end, or the recording
// going on where the replay stopped, is the divergence. Not replayed: faults
// injected at the log and commit points (a fault.injected written by the
// journal), and a session the runtime recovered after its actor failed;
// both show as a divergence at that seq.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/hook/hook_registry.h"
#include "actors/session/session_actor.h"
#include "actors/tool/tool_registry.h"
#include "replay/event_diff.h"
#include "replay/replay_report.h"
#include "storage/event_log.h"

namespace carapace {

// What a replay runs the session with.
struct ReplayConfiguration {
  std::shared_ptr<ToolRegistry> tools;  // as registered now (their specs shape the prompt)
  std::shared_ptr<HookRegistry> hooks;
  // The session's settings as they are now, from its recorded state (its
  // workspace, turn budget and instructions).
  std::function<SessionSettings(const SessionState& opening)> settings;
};

struct ReplayOptions {
  std::shared_ptr<ToolRegistry> tools;  // as registered now (their specs shape the prompt)
  std::shared_ptr<HookRegistry> hooks;
  // The session's settings as they are now, from its recorded opening state
  // (its workspace, turn budget and instructions).
  std::function<SessionSettings(const SessionState& opening)> settings;
  // Where the recording changed how the session runs (a session.configured
  // written by a resume or a fork: another scenario, provider or
  // configuration), the replay writes the same record and asks this for the
  // tools, hooks and settings to go on with (`*next` holds the current
  // ones). Unset: the replay keeps its own throughout — a replay against a
  // changed configuration.
  std::function<Status(const SessionConfigured& recorded, ReplayConfiguration* next)> reconfigure;
  uint64_t until_turn = 0;  // stop after the checkpoint of this turn; 0: the whole session
  std::string scratch_dir;  // an empty directory for the scratch log; "": a temporary one
  size_t context_events = 3;
};

// Errors: the session is unknown or its log unreadable or damaged (nothing
// replayed). A divergence is a result, not an error.
Status replay_session(const EventLog& log, const std::string& id, const ReplayOptions& options,
                      ReplayReport* out);

}  // namespace carapace
