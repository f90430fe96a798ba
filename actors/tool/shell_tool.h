// Shell tool: the built-in "shell" tool, which runs `bash -c <command>` in the
// session's workspace under a deadline (see actors/tool/process/process.h).
//
// Arguments: {"command": string, "timeout_ms"?: integer, "cwd"?: string}. The
// command runs with the workspace (or `cwd`, confined to it) as its working
// directory, an empty stdin, and stdout and stderr merged. A command that
// matches a blocked pattern is refused without running. Its environment is the
// runtime's without secrets (actors/tool/process/tool_env.h). The result is an
// error when the command could not start, exited non-zero, was killed by a
// signal, timed out, or was stopped by the runtime; a last line says which
// ("[exit status 2]", "[killed by signal 9]", "[timed out after 30000 ms; the
// command and every process it started were killed]"). Every process the
// command started dies with the call (actors/tool/process/process.h); when some were
// still running as it ended, a line says how many were killed. When the output is over the cap, its head and tail are kept
// with a marker between them; truncated is set and original_bytes is the
// number of bytes the command wrote (0 when not truncated).
//
// Each command runs in the sandbox `sandbox` describes (Landlock: writes only
// in the workspace and a per-call scratch directory, which is its TMPDIR;
// optionally no network). Blocked patterns catch a model's obvious mistakes,
// not a determined one: they are a courtesy check, not a boundary.
//
// Thread safety: the tool function holds only immutable state and may be
// called from several threads at once; each call blocks its thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/tool/process/process.h"
#include "actors/tool/process/sandbox.h"
#include "actors/tool/tool.h"
#include "actors/tool/process/tool_env.h"
#include "base/status.h"

namespace carapace {

struct ShellToolOptions {
  uint64_t timeout_ms = 30000;  // default per call; a call may ask for less or more, capped by max_timeout_ms
  uint64_t max_timeout_ms = 600000;
  uint64_t max_output_bytes = 64 * 1024;
  std::vector<std::string> blocked_patterns;  // ECMAScript regexes searched in the command
  // Which of the runtime's environment variables a command sees (secrets
  // removed by default), taken from the environment when the tool is made.
  ToolEnvOptions env;
  // The confinement of each command (actors/tool/process/sandbox.h).
  SandboxOptions sandbox;
  // The runtime's running calls, so that it can stop them (may be null).
  std::shared_ptr<ProcessSet> processes;
};

// OK, or Status::invalid_argument naming the first blocked pattern that is
// not a valid ECMAScript regex, a timeout that is 0 or above
// max_timeout_ms, or a bad env option. Call it before make_shell_tool.
Status validate_shell_options(const ShellToolOptions& options);

// The "shell" tool (blocking, not idempotent). With options that
// validate_shell_options or plan_sandbox (on this kernel) rejects, every call
// fails with the reason, so a bad blocked pattern or an unenforceable sandbox
// never silently lets commands through.
ToolDefinition make_shell_tool(const ShellToolOptions& options);

}  // namespace carapace
