// What a runtime builds from its configuration for its sessions — the
// built-in tools, the configured hooks, a session's settings — shared by
// the runtime and by replays (replay/replayer.h), so that a replay runs
// with exactly what a run would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/hook/hook_registry.h"
#include "actors/session/session_actor.h"
#include "actors/tool/process.h"
#include "actors/tool/tool_registry.h"
#include "runtime/config.h"
#include "storage/event_log.h"

namespace carapace {

// Adds the tools `config` enables (tools.enabled), each passed through
// `decorate` if given; the shell tool's calls join `processes` (may be null)
// while they run. invalid_argument naming an unknown tool.
Status add_builtin_tools(const Config& config, const std::function<ToolDefinition(ToolDefinition)>& decorate,
                         ToolRegistry* tools, std::shared_ptr<ProcessSet> processes = nullptr);

// Adds the command hooks `config` lists.
Status add_config_hooks(const Config& config, HookRegistry* hooks);

// A session's settings: the configuration's, with the session's own turn
// budget (0: the configuration's) and instructions added to the configuration's.
SessionSettings session_settings(const Config& config, const std::string& workspace, uint64_t max_turns,
                                 const std::string& extra_instructions, LoopMutation mutation = LoopMutation::kNone);

// The session.configured event of a session run with `config`, the
// scripted provider's scenario file (its text; "" for other providers) and `tools`.
SessionConfigured session_configured(const Config& config, const std::string& scenario_text,
                                     const std::vector<ToolSpec>& tools, const std::string& origin = "start");

// Reads a scenario file's text (for session.configured).
Status read_scenario_text(const std::string& path, std::string* out);

// The configuration and scenario a session was run with: the
// session.configured of its opening. not_found if it has none (recorded before sessions
// stored them).
struct StoredRun {
  Config config;
  std::string scenario;  // the scenario file's text, or ""
  std::vector<ToolSpec> tools;  // the tools registered when it started, in order
};

// Registers the MCP tools (mcp__...) among `recorded` that `tools` lacks,
// with functions that refuse to run: a replay answers their calls from the
// log and starts no server, but their specs shape its prompts.
Status add_recorded_mcp_tools(const std::vector<ToolSpec>& recorded, ToolRegistry* tools);
Status stored_run(const EventLog& log, const std::string& id, StoredRun* out);

}  // namespace carapace
