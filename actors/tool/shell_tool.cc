#include "actors/tool/shell_tool.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "actors/tool/process/process.h"
#include "actors/tool/workspace.h"
#include "base/pattern.h"
#include "base/unique_fd.h"

extern char** environ;

namespace carapace {
namespace {

// What a call reads; built once by make_shell_tool and shared, never changed.
struct ShellConfig {
  ShellToolOptions options;
  std::vector<Pattern> blocked;
  std::vector<std::string> environment;  // what every command gets (TMPDIR is the call's scratch when sandboxed)
  SandboxPlan sandbox;
  Status invalid;  // not OK: every call fails with it
};

Status compile_patterns(const std::vector<std::string>& patterns, std::vector<Pattern>* out) {
  for (size_t i = 0; i < patterns.size(); ++i) {
    const std::string where = "blocked pattern " + std::to_string(i + 1);
    if (patterns[i].empty())
      return Status::invalid_argument(where + " is empty; it would refuse every command");
    Pattern compiled;
    Status s = Pattern::compile(patterns[i], &compiled);
    if (!s.ok()) return Status::invalid_argument(where + ": " + s.message());
    out->push_back(std::move(compiled));
  }
  return Status::ok_status();
}

// A positive whole number of milliseconds; models sometimes write 5000.0.
bool parse_timeout(const nlohmann::json& value, uint64_t* timeout_ms) {
  if (value.is_number_unsigned()) {
    *timeout_ms = value.get<uint64_t>();
  } else if (value.is_number_integer()) {  // signed: parsed JSON never is when >= 0, built JSON can be
    int64_t ms = value.get<int64_t>();
    if (ms <= 0) return false;
    *timeout_ms = static_cast<uint64_t>(ms);
  } else if (value.is_number_float()) {
    double ms = value.get<double>();
    if (!(ms >= 1 && ms <= 1e15) || ms != static_cast<double>(static_cast<uint64_t>(ms))) return false;
    *timeout_ms = static_cast<uint64_t>(ms);
  } else {
    return false;  // strings, booleans, ...
  }
  return *timeout_ms > 0;
}

std::string describe(const ShellToolOptions& options, const SandboxPlan& sandbox) {
  std::string confinement = describe_sandbox(sandbox);
  return "Runs a command line with `bash -c` and returns its output (stdout and stderr merged, in order). "
         "Use it to build, test, search and inspect. The command starts in the session's workspace "
         "directory, or in `cwd` (a directory inside the workspace); stdin is empty, so interactive "
         "programs see end-of-file. Each call is a new shell: `cd` and variables do not carry over. "
         "The timeout is " +
         std::to_string(options.timeout_ms) + " ms unless `timeout_ms` asks otherwise (at most " +
         std::to_string(options.max_timeout_ms) +
         " ms); at the timeout the command and every process it started are killed. Nothing outlives the call: "
         "background and detached processes (`&`, nohup, setsid) still running when the command ends are "
         "killed then, so start a server and use it within one command. Output over " +
         std::to_string(options.max_output_bytes) +
         " bytes keeps its beginning and its end with a marker between them; send large output to a "
         "file and read the parts you need. A non-zero exit, a signal "
         "or a timeout makes the result an error whose last line says which, e.g. [exit status 1]." +
         (confinement.empty() ? "" : " " + confinement);
}

JsonText schema(const ShellToolOptions& options) {
  nlohmann::json s = {
      {"type", "object"},
      {"properties",
       {{"command", {{"type", "string"}, {"description", "The bash command line to run."}}},
        {"timeout_ms",
         {{"type", "integer"},
          {"minimum", 1},
          {"maximum", options.max_timeout_ms},
          {"description", "Deadline in milliseconds (default " + std::to_string(options.timeout_ms) + ")."}}},
        {"cwd",
         {{"type", "string"},
          {"description", "Working directory, relative to the workspace (default: the workspace)."}}}}},
      {"required", {"command"}},
      {"additionalProperties", false}};
  return JsonText{s.dump()};
}

void add_line(ToolResult* result, const std::string& line) {
  if (!result->output.empty() && result->output.back() != '\n') result->output += '\n';
  result->output += line;
}

ToolResult run_shell(const ShellConfig& config, const nlohmann::json& args, const ToolContext& context) {
  if (!config.invalid.ok()) {
    return ToolResult::error("the shell tool is misconfigured: " + config.invalid.message());
  }
  if (!args.is_object()) {
    return ToolResult::error("the arguments must be a JSON object such as {\"command\": \"ls -l\"}");
  }
  auto command_it = args.find("command");
  if (command_it == args.end() || !command_it->is_string()) {
    return ToolResult::error("missing \"command\": give the bash command line to run, as a string");
  }
  const std::string& command = command_it->get_ref<const std::string&>();
  if (command.empty()) return ToolResult::error("\"command\" is empty: give the bash command line to run");
  if (size_t nul = command.find('\0'); nul != std::string::npos) {
    return ToolResult::error("\"command\" contains a NUL byte (at byte " + std::to_string(nul) +
                             "); bash would run only the text before it, so nothing was run. Remove it (in a "
                             "printf format, write \\0 instead)");
  }

  uint64_t timeout_ms = config.options.timeout_ms;
  if (auto it = args.find("timeout_ms"); it != args.end() && !it->is_null()) {
    if (!parse_timeout(*it, &timeout_ms)) {
      return ToolResult::error("\"timeout_ms\" must be a positive integer number of milliseconds, not " +
                               it->dump());
    }
  }
  timeout_ms = std::min(timeout_ms, config.options.max_timeout_ms);

  for (const Pattern& pattern : config.blocked) {
    if (pattern.search(command)) {
      return ToolResult::error("command refused: it matches the blocked pattern '" + pattern.text() +
                               "'; it was not run");
    }
  }

  WorkspaceRoot root;
  if (Status s = WorkspaceRoot::open(context.workspace, &root); !s.ok()) {
    return ToolResult::error("the session has no usable workspace: " + s.message());
  }
  // The working directory is opened beneath the root and entered by its
  // descriptor (fchdir), so no link swapped in meanwhile can move it out.
  std::string cwd_rel = ".";
  std::string cwd = root.path();
  std::string cwd_shown = ".";
  if (auto it = args.find("cwd"); it != args.end() && !it->is_null()) {
    if (!it->is_string())
      return ToolResult::error("\"cwd\" must be a string: a directory inside the workspace");
    cwd_shown = it->get_ref<const std::string&>();
    if (Status s = root.relative(cwd_shown, &cwd_rel); !s.ok()) return ToolResult::error("cwd: " + s.message());
    cwd = cwd_rel == "." ? root.path() : root.path() + "/" + cwd_rel;
  }
  int cwd_fd = -1;
  if (Status s = root.open(cwd_shown, cwd_rel, O_PATH | O_DIRECTORY, 0, &cwd_fd); !s.ok()) {
    if (s.message().find("should be a directory") != std::string::npos) {
      return ToolResult::error("cwd: '" + cwd_shown + "' is not a directory; give a directory inside the workspace");
    }
    return ToolResult::error("cwd: " + s.message());
  }
  UniqueFd close_cwd(cwd_fd);

  // The call's sandbox: its scratch directory (removed when it goes, after
  // every process of the call is gone) and its Landlock ruleset.
  std::unique_ptr<CallSandbox> sandbox;
  std::vector<std::string> environment = config.environment;
  if (config.sandbox.mode != "off" || config.sandbox.network_off) {
    if (Status s = CallSandbox::create(config.sandbox, config.options.sandbox, root, &sandbox); !s.ok()) {
      return ToolResult::error("the command was not run: its sandbox could not be prepared: " + s.message());
    }
    std::erase_if(environment, [](const std::string& e) { return e.rfind("TMPDIR=", 0) == 0; });
    environment.push_back("TMPDIR=" + sandbox->scratch_dir());
  }

  ProcessResult process = run_process(ProcessOptions{.argv = {"bash", "-c", command},
                                                     .cwd = cwd,
                                                     .cwd_fd = cwd_fd,
                                                     .env = environment,
                                                     .timeout_ms = timeout_ms,
                                                     .max_output_bytes = config.options.max_output_bytes,
                                                     .processes = config.options.processes.get(),
                                                     .session = context.session_id,
                                                     .confinement = sandbox ? sandbox->confinement()
                                                                            : ProcessConfinement{}});
  if (!process.started) return ToolResult::error(process.error);

  ToolResult result;
  result.output = std::move(process.output);
  result.truncated = process.truncated;
  result.original_bytes = process.truncated ? process.output_bytes : 0;
  if (process.timed_out) {
    result.is_error = true;
    result.timed_out = true;
    add_line(&result, "[timed out after " + std::to_string(timeout_ms) +
                          " ms; the command and every process it started were killed]");
  } else if (process.stopped) {
    result.is_error = true;
    add_line(&result, "[stopped: the runtime is shutting down; the command and every process it started were killed]");
  } else if (process.term_signal != 0) {
    result.is_error = true;
    add_line(&result, "[killed by signal " + std::to_string(process.term_signal) + "]");
  } else if (process.exit_code != 0) {
    result.is_error = true;
    add_line(&result, "[exit status " + std::to_string(process.exit_code) + "]");
  }
  if (process.killed_background > 0 && !process.timed_out && !process.stopped) {
    uint64_t n = process.killed_background;
    add_line(&result, "[" + std::to_string(n) + " background process" + (n == 1 ? " was" : "es were") +
                          " still running when the command ended; " + (n == 1 ? "it was" : "they were") + " killed]");
  }
  if (!process.error.empty()) {  // the run was cut short by the runtime's own failure
    result.is_error = true;
    add_line(&result, "[" + process.error + "]");
  }
  return result;
}

}  // namespace

Status validate_shell_options(const ShellToolOptions& options) {
  if (options.timeout_ms == 0 || options.timeout_ms > options.max_timeout_ms) {
    return Status::invalid_argument("shell timeout_ms " + std::to_string(options.timeout_ms) +
                                    " must be between 1 and max_timeout_ms (" +
                                    std::to_string(options.max_timeout_ms) + ")");
  }
  if (Status env = validate_tool_env(options.env); !env.ok()) {
    return Status::invalid_argument("env: " + env.message());
  }
  std::vector<Pattern> compiled;
  return compile_patterns(options.blocked_patterns, &compiled);
}

ToolDefinition make_shell_tool(const ShellToolOptions& options) {
  auto config = std::make_shared<ShellConfig>();
  config->options = options;
  config->invalid = validate_shell_options(options);
  if (config->invalid.ok()) config->invalid = compile_patterns(options.blocked_patterns, &config->blocked);
  if (config->invalid.ok()) config->environment = tool_environment(options.env, environ);
  if (config->invalid.ok()) {
    config->invalid = plan_sandbox(options.sandbox, sandbox_support(), &config->sandbox, nullptr);
  }
  std::shared_ptr<const ShellConfig> shared = std::move(config);

  ToolDefinition tool;
  tool.spec = ToolSpec{
      .name = "shell", .description = describe(options, shared->sandbox), .schema = schema(options), .idempotent = false};
  tool.blocking = true;
  tool.run = [shared](const nlohmann::json& args, const ToolContext& context) {
    return run_shell(*shared, args, context);
  };
  return tool;
}

}  // namespace carapace
