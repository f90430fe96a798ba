#include "runtime/session_setup.h"

#include "actors/tool/file_tools.h"
#include "actors/tool/shell_tool.h"


#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace carapace {

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
      for (const std::string& w : warnings) spdlog::warn("{}", w);
      tool = make_shell_tool(shell);
    } else if (name == "read_file")
      tool = make_read_file_tool(config.files);
    else if (name == "write_file")
      tool = make_write_file_tool(config.files);
    else if (name == "list_dir")
      tool = make_list_dir_tool(config.files);
    else
      return Status::invalid_argument("tools.enabled names an unknown tool: " + name);
    if (decorate) tool = decorate(std::move(tool));
    CARAPACE_RETURN_IF_ERROR(tools->add(std::move(tool)));
  }
  return Status();
}

Status add_config_hooks(const Config& config, HookRegistry* hooks) {
  for (const auto& h : config.hooks) {
    CARAPACE_RETURN_IF_ERROR(hooks->add(HookDefinition{
        .name = h.name, .event = h.event, .matcher = h.matcher, .command = h.command, .timeout_ms = h.timeout_ms}));
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
  if (!extra_instructions.empty()) {
    settings.instructions += (settings.instructions.empty() ? "" : "\n\n") + extra_instructions;
  }
  return settings;
}

SessionConfigured session_configured(const Config& config, const std::string& scenario_text,
                                     const std::vector<ToolSpec>& tools, const std::string& origin) {
  nlohmann::json specs = nlohmann::json::array();
  for (const auto& t : tools) {
    nlohmann::json schema = nlohmann::json::parse(t.schema.text, nullptr, false);
    specs.push_back({{"name", t.name},
                     {"description", t.description},
                     {"schema", schema.is_discarded() ? nlohmann::json(t.schema.text) : schema},
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
  nlohmann::json specs = nlohmann::json::parse(c.tools.text, nullptr, false);
  if (!specs.is_array()) return tools;
  for (const auto& t : specs) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) continue;
    tools.push_back(ToolSpec{.name = t["name"],
                             .description = t.value("description", ""),
                             .schema = JsonText{t.contains("schema") ? t["schema"].dump() : ""},
                             .idempotent = t.value("idempotent", false)});
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

}  // namespace carapace
