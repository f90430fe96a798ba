// What a runtime builds from its configuration for its sessions — the
// built-in tools, the configured hooks, a session's settings — shared by
// the runtime and by replays (replay/replayer.h), so that a replay runs
// with exactly what a run would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/hook/hooks.h"
#include "actors/session/session_actor.h"
#include "actors/tool/process.h"
#include "actors/tool/tool_registry.h"
#include "runtime/config.h"

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

}  // namespace carapace
