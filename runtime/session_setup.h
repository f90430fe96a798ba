// What a runtime builds from its configuration for its sessions — the
// built-in tools, the configured hooks, a session's settings — shared by
// the runtime and by replays (replay/replayer.h), so that a replay runs
// with exactly what a run would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/hook/hook_registry.h"
#include "actors/session/session_actor.h"
#include "actors/tool/process/process.h"
#include "actors/tool/tool_registry.h"
#include "runtime/config.h"
#include "storage/event_log.h"

namespace carapace {

class McpHub;

// Adds the tools `config` enables (tools.enabled), each passed through
// `decorate` if given; the shell tool's calls join `processes` (may be null)
// while they run. invalid_argument naming an unknown tool.
Status add_builtin_tools(const Config& config, const std::function<ToolDefinition(ToolDefinition)>& decorate,
                         ToolRegistry* tools, std::shared_ptr<ProcessSet> processes = nullptr);

// The hub of the MCP servers `config` lists (null when none), whose tools
// go into `tools` as the servers start. They run under the shell's
// sandbox: a mode the kernel cannot enforce is an error here.
Status make_mcp_hub(const Config& config, std::shared_ptr<ToolRegistry> tools, std::shared_ptr<McpHub>* out);

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

// Which of a session's session.configured records: the one it started
// with (what a replay starts from), or its latest (how it runs now: the
// opening's, or the one the last resume or fork that changed it wrote; the
// session index points at it).
enum class RecordedAt { kOpening, kLatest };

// not_found if the session has none (recorded before sessions stored them).
Status recorded_configuration(const EventLog& log, const std::string& id, RecordedAt which,
                              SessionConfigured* out);

// Whether two records describe the same run (origin aside).
bool same_configuration(const SessionConfigured& a, const SessionConfigured& b);

// A session's recorded configuration and scenario, parsed.
struct StoredRun {
  Config config;
  std::string scenario;  // the scenario file's text, or ""
  std::vector<ToolSpec> tools;  // the tools registered then, in order
};
Status stored_run(const EventLog& log, const std::string& id, RecordedAt which, StoredRun* out);

// Whether session `id`'s latest stored configuration came with it from a
// bundle (`carapace bundle import`: its seq is within
// SessionMeta::imported_seq). Such a configuration is a record of how the
// session ran elsewhere: a resume or fork runs with the home's own unless
// told to trust it, and no command, server or file it names is used by a
// replay.
Status bundle_configuration(const EventLog& log, const std::string& id, bool* from_bundle);

// Whether any event of session `id` came from a bundle.
Status imported_session(const EventLog& log, const std::string& id, bool* imported);

// One setting in which a stored configuration differs from the home's: its
// key path ("provider.base_url") and both values as JSON text ("(absent)"
// for a key one of them lacks). Configurations hold no secret values.
struct ConfigDifference {
  std::string key;
  std::string recorded;
  std::string home;
};

// Every setting in which `recorded` (with the scenario text stored with it)
// differs from `home`, in key order; the scenario as "scenario" (its size,
// not its text).
std::vector<ConfigDifference> configuration_differences(const Config& recorded,
                                                        const std::string& recorded_scenario,
                                                        const Config& home);

// Clears the prompt files `config` names (prompt.identity_file,
// prompt.custom_instructions_file): a configuration that came from
// elsewhere never has a file of this machine read. One line per file
// cleared, naming it, for the user.
std::vector<std::string> drop_prompt_files(Config* config);

// Registers the MCP tools (mcp__...) among `recorded` that `tools` lacks,
// with functions that refuse to run: a replay answers their calls from the
// log and starts no server, but their specs shape its prompts.
Status add_recorded_mcp_tools(const std::vector<ToolSpec>& recorded, ToolRegistry* tools);

// The tools a session.configured records, as specs.
std::vector<ToolSpec> recorded_tools(const SessionConfigured& configured);

}  // namespace carapace
