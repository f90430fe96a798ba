#include "runtime/session_setup.h"

#include "base/lib_log.h"

#include "actors/tool/ask_user_tool.h"
#include "actors/tool/file_tools.h"
#include "actors/tool/mcp/mcp_hub.h"
#include "actors/tool/process/sandbox.h"
#include "actors/tool/shell_tool.h"


#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "base/bounded_json.h"
#include "storage/session_meta.h"

namespace carapace {

Status make_mcp_hub(const Config& config, std::shared_ptr<ToolRegistry> tools, std::shared_ptr<McpHub>* out) {
  out->reset();
  if (config.mcp_servers.empty()) return Status();
  SandboxPlan plan;
  CARAPACE_RETURN_IF_ERROR(plan_sandbox(config.sandbox, sandbox_support(), &plan, nullptr));
  ToolEnvOptions env = config.tool_env;
  env.secret_names = provider_key_env_names(config.provider);
  *out = McpHub::make(McpHubOptions{.servers = config.mcp_servers,
                                    .env_policy = env,
                                    .sandbox = config.sandbox,
                                    .max_output_bytes = config.shell.max_output_bytes},
                      std::move(tools));
  return Status();
}

Status add_builtin_tools(const Config& config, const std::function<ToolDefinition(ToolDefinition)>& decorate,
                         ToolRegistry* tools, std::shared_ptr<ProcessSet> processes) {
  for (const auto& name : config.tools_enabled) {
    ToolDefinition tool;
    if (name == "shell") {
      ShellToolOptions shell = config.shell;
      shell.env = config.tool_env;
      shell.env.secret_names = provider_key_env_names(config.provider);
      shell.processes = processes;
      shell.sandbox = config.sandbox;
      // What the kernel cannot enforce stops the runtime here, with the
      // reason, instead of failing every call.
      SandboxPlan plan;
      std::vector<std::string> warnings;
      if (Status s = plan_sandbox(shell.sandbox, sandbox_support(), &plan, &warnings); !s.ok()) return s;
      for (const std::string& w : warnings) lib_log().warn("{}", w);
      tool = make_shell_tool(shell);
    } else if (name == "read_file")
      tool = make_read_file_tool(config.files);
    else if (name == "write_file")
      tool = make_write_file_tool(config.files);
    else if (name == "list_dir")
      tool = make_list_dir_tool(config.files);
    else if (name == kAskUserTool)
      tool = ask_user_tool();  // answered by a person: not decorated, never run
    else
      return Status::invalid_argument("tools.enabled names an unknown tool: " + name);
    if (decorate && name != kAskUserTool) tool = decorate(std::move(tool));
    CARAPACE_RETURN_IF_ERROR(tools->add(std::move(tool)));
  }
  return Status();
}

Status add_config_hooks(const Config& config, HookRegistry* hooks) {
  for (const auto& h : config.hooks) {
    CARAPACE_RETURN_IF_ERROR(hooks->add(HookDefinition{
        .name = h.name, .event = h.event, .matcher = h.matcher, .command = h.command, .timeout_ms = h.timeout_ms,
        .fail_closed = h.fail_closed}));
  }
  return Status();
}

SessionSettings session_settings(const Config& config, const std::string& workspace, uint64_t max_turns,
                                 const std::string& extra_instructions, LoopMutation mutation) {
  SessionSettings settings{
      .max_turns = max_turns ? max_turns : config.max_turns,
      .context_max_chars = config.context_max_chars,
      .retry = config.retry,
      .prompt = config.prompt,
      .instructions = config.instructions,
      .prices = config.prices,
      .workspace = workspace,
      .tool_timeout_ms = config.tool_timeout_ms,
      .provider_timeout_ms = config.provider.timeout_ms,
      .mutation = mutation,
  };
  if (!config.approvals_tools.empty()) {
    // Checked when the configuration was read.
    (void)Pattern::compile(config.approvals_tools, &settings.approvals.tools);
  }
  settings.approvals.non_idempotent = config.approvals_non_idempotent;
  settings.approvals.expires_after_ms = config.approvals_expires_after_ms;
  settings.approvals.on_expiry = config.approvals_on_expiry;
  if (!extra_instructions.empty()) {
    settings.instructions += (settings.instructions.empty() ? "" : "\n\n") + extra_instructions;
  }
  return settings;
}

SessionConfigured session_configured(const Config& config, const std::string& scenario_text,
                                     const std::vector<ToolSpec>& tools, const std::string& origin) {
  nlohmann::json specs = nlohmann::json::array();
  for (const auto& t : tools) {
    nlohmann::json schema;
    bool parsed = parse_bounded_json(t.schema.text, "the schema of tool " + t.name, &schema).ok();
    specs.push_back({{"name", t.name},
                     {"description", t.description},
                     {"schema", parsed ? schema : nlohmann::json(t.schema.text)},
                     {"idempotent", t.idempotent}});
  }
  return SessionConfigured{
      .config = JsonText{config_to_json(config).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)},
      .scenario = scenario_text,
      .tools = JsonText{specs.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)},
      .origin = origin};
}

Status add_recorded_mcp_tools(const std::vector<ToolSpec>& recorded, ToolRegistry* tools) {
  for (const auto& spec : recorded) {
    if (spec.name.rfind("mcp__", 0) != 0 || tools->find(spec.name)) continue;
    ToolDefinition def{.spec = spec, .blocking = false, .run = [](const nlohmann::json&, const ToolContext&) {
                         return ToolResult::error("an MCP tool does not run in a replay: its calls are answered "
                                                  "from the log");
                       }};
    CARAPACE_RETURN_IF_ERROR(tools->add(std::move(def)));
  }
  return Status();
}

Status recorded_configuration(const EventLog& log, const std::string& id, RecordedAt which,
                              SessionConfigured* out) {
  SessionMeta meta;
  Status indexed = which == RecordedAt::kLatest ? log.get_meta(id, &meta) : Status::not_found("");
  if (!indexed.ok() && !indexed.is_not_found()) return indexed;
  if (indexed.ok() && meta.configured_seq > 0) {
    std::vector<Event> events;
    CARAPACE_RETURN_IF_ERROR(log.read(id, meta.configured_seq, meta.configured_seq, &events));
    const auto* c = events.empty() ? nullptr : get_if<SessionConfigured>(events.front());
    if (c == nullptr) {
      return Status::corruption("the session index of " + id + " says its configuration is at seq " +
                                std::to_string(meta.configured_seq) +
                                ", which is not a session.configured (`carapace verify " + id + "`)");
    }
    *out = *c;
    return Status();
  }
  // The opening's (the only one of sessions older than the index entry):
  // before the first checkpoint, read one event at a time so that no record
  // after it is read.
  for (uint64_t seq = 1; seq <= 8; ++seq) {
    std::vector<Event> events;
    CARAPACE_RETURN_IF_ERROR(log.read(id, seq, seq, &events));
    if (events.empty()) {
      if (seq == 1) return Status::not_found("no session '" + id + "'");
      break;
    }
    if (std::holds_alternative<TurnCommitted>(events.front().body)) break;
    if (const auto* c = get_if<SessionConfigured>(events.front())) {
      *out = *c;
      return Status();
    }
  }
  return Status::not_found("session " + id + " was recorded before sessions stored their configuration");
}

std::vector<ToolSpec> recorded_tools(const SessionConfigured& c) {
  std::vector<ToolSpec> tools;
  nlohmann::json specs;
  if (!parse_bounded_json(c.tools.text, "the recorded tool specs", &specs).ok() || !specs.is_array())
    return tools;
  for (const auto& t : specs) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
    // Recorded elsewhere, for a bundle: a field of another type is left at its default.
    auto description = t.find("description");
    auto idempotent = t.find("idempotent");
    tools.push_back(ToolSpec{
        .name = t["name"],
        .description =
            description != t.end() && description->is_string() ? description->get<std::string>() : "",
        .schema = JsonText{t.contains("schema") ? t["schema"].dump() : ""},
        .idempotent = idempotent != t.end() && idempotent->is_boolean() && idempotent->get<bool>()});
  }
  return tools;
}

bool same_configuration(const SessionConfigured& a, const SessionConfigured& b) {
  return a.config == b.config && a.scenario == b.scenario && a.tools == b.tools;
}

Status stored_run(const EventLog& log, const std::string& id, RecordedAt which, StoredRun* out) {
  SessionConfigured c;
  CARAPACE_RETURN_IF_ERROR(recorded_configuration(log, id, which, &c));
  StoredRun run;
  std::vector<std::string> warnings;
  CARAPACE_RETURN_IF_ERROR(
      parse_config(c.config.text, "the configuration stored with session " + id, &run.config, &warnings));
  run.scenario = c.scenario;
  run.tools = recorded_tools(c);
  *out = std::move(run);
  return Status();
}

Status bundle_configuration(const EventLog& log, const std::string& id, bool* from_bundle) {
  *from_bundle = false;
  SessionMeta meta;
  Status s = log.get_meta(id, &meta);
  if (s.is_not_found()) return Status();
  CARAPACE_RETURN_IF_ERROR(s);
  // An imported session's index always points at its configuration; one
  // recorded before the index did has none from a bundle.
  *from_bundle = meta.imported_seq > 0 && meta.configured_seq > 0 && meta.configured_seq <= meta.imported_seq;
  return Status();
}

Status imported_session(const EventLog& log, const std::string& id, bool* imported) {
  *imported = false;
  SessionMeta meta;
  Status s = log.get_meta(id, &meta);
  if (s.is_not_found()) return Status();
  CARAPACE_RETURN_IF_ERROR(s);
  *imported = meta.imported_seq > 0;
  return Status();
}

namespace {

// Every leaf of `j` (arrays are leaves) under its dotted key path.
void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>* out) {
  if (j.is_object() && !j.empty()) {
    for (const auto& [key, value] : j.items()) flatten(value, prefix.empty() ? key : prefix + "." + key, out);
    return;
  }
  (*out)[prefix] = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::vector<ConfigDifference> configuration_differences(const Config& recorded,
                                                        const std::string& recorded_scenario,
                                                        const Config& home) {
  std::map<std::string, std::string> a, b;
  flatten(config_to_json(recorded), "", &a);
  flatten(config_to_json(home), "", &b);
  std::vector<ConfigDifference> out;
  const std::string absent = "(absent)";
  for (const auto& [key, value] : a) {
    auto it = b.find(key);
    if (it == b.end()) {
      out.push_back({key, value, absent});
    } else if (it->second != value) {
      out.push_back({key, value, it->second});
    }
  }
  for (const auto& [key, value] : b) {
    if (!a.count(key)) out.push_back({key, absent, value});
  }
  if (!recorded_scenario.empty()) {
    out.push_back({"scenario",
                   "the recorded scenario (" + std::to_string(recorded_scenario.size()) +
                       " bytes; the tool calls in its replies run as commands)",
                   home.provider.scenario.empty() ? "none" : "the file " + home.provider.scenario});
  }
  std::sort(out.begin(), out.end(),
            [](const ConfigDifference& x, const ConfigDifference& y) { return x.key < y.key; });
  return out;
}

std::vector<std::string> drop_prompt_files(Config* config) {
  std::vector<std::string> dropped;
  if (!config->prompt.identity_file.empty()) {
    dropped.push_back("prompt.identity_file " + config->prompt.identity_file +
                      " was not read: a configuration from a bundle has no file of this machine read; the "
                      "identity layer is the configuration's own text or the default");
    config->prompt.identity_file.clear();
  }
  if (!config->prompt.custom_instructions_file.empty()) {
    dropped.push_back("prompt.custom_instructions_file " + config->prompt.custom_instructions_file +
                      " was not read: a configuration from a bundle has no file of this machine read; the "
                      "custom instructions layer is left out");
    config->prompt.custom_instructions_file.clear();
  }
  return dropped;
}

}  // namespace carapace
