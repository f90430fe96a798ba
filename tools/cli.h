// What every `carapace` subcommand shares: the data home, opening the log,
// and the output conventions (human lines, or --json as
// {"success", "data", "summary"}; errors name what was wrong and what to do).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/redactor.h"
#include "storage/event_log.h"

namespace carapace {
class Collector;
}

namespace carapace::cli {

// Exit codes.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the command ran and found a problem, or failed
constexpr int kExitUsage = 2;   // the command line was wrong
constexpr int kExitWaiting = 3; // the session waits for a person (docs/approvals.md): answer it to go on

struct Context {
  std::string home_flag;  // --home
  std::vector<std::string> command_names;  // carapace's subcommands, for with_home()
  bool json = false;      // --json of the running subcommand
  std::string command_path;  // the running subcommand, e.g. "trace export" (for a default hint)
  std::function<int()> run;
  // Builds spans from the events of the runtimes this command opens
  // (open_runtime starts it); outlives them, flushed when the command ends.
  std::shared_ptr<Collector> collector;

  // --home, else $CARAPACE_HOME, else ~/.carapace.
  std::string home() const;
  std::string log_path() const { return home() + "/log"; }

  // Checks the home, creating it (owner-only) when `create` is set and it is
  // missing (runtime/home.h); then, the first time, tells home_ready, so
  // that the command that creates a home logs into it too.
  Status prepare_home(bool create) const;
  mutable std::function<void()> home_ready;
  // Run after the command, whatever its outcome (not after a crash).
  std::vector<std::function<void()>> at_end;

  // Opens the log; prints the error (with a hint) and returns nullptr on failure.
  std::unique_ptr<EventLog> open_log(EventLog::Mode mode) const;
  // Every session of `log`, for a command that changes the home and must
  // see all of it first (gc, sessions rm): an unreadable index entry is
  // reported with `refusal` (what the command will not do) as the hint, and
  // kExitFailed returned; else kExitOk.
  int list_every_session(const EventLog& log, const std::string& refusal, std::vector<SessionMeta>* out) const;

  // Prints a failure as a human line on stderr or a JSON envelope on stdout
  // (the hint through with_home()); exit 1.
  int fail(const Status& status, const std::string& hint = "") const;
  // The same for a command line that was wrong (a value no option takes,
  // options that do not go together): exit 2.
  int usage(const Status& status, const std::string& hint = "") const;
  // `text` with --home added to every `carapace COMMAND` in it when --home
  // was given, so that a printed hint works as pasted.
  std::string with_home(std::string_view text) const;

  // Prints {"success": true, "data": data, "summary": summary}.
  void print_success(const nlohmann::json& data, const std::string& summary) const;

  // What every output that shows recorded content passes through
  // (base/redactor.h): the known secret patterns, the home directory as ~.
  const Redactor& redactor() const;
  // Recorded or outside text as a human line shows it: redacted, with every
  // terminal control made visible (base/text.h terminal_safe), so that what
  // a model, a tool or a server wrote cannot drive the terminal.
  std::string shown(std::string_view text) const;
  // Replaces the default (the home config's `redaction` rules added).
  void use_redactor(std::shared_ptr<const Redactor> redactor) { redactor_ = std::move(redactor); }

 private:
  mutable std::shared_ptr<const Redactor> redactor_;
};

// Whether a JSON key holds one of Carapace's own ids, digests or references
// (*_id, *digest, *hash, *_ref, ref, a span's request_body / response_body):
// hex the redactor would take for a secret. The exports' rule
// (export_reference_key), so that `log show`, `trace show` and the exports
// print a body reference the same way.
bool our_reference(const std::string& key);

// Masks secrets in every string of `j` (recursively), except the values of
// keys that hold our own ids, digests and references (our_reference).
void redact_json(nlohmann::json& j, const Redactor& redactor);

// Prints `j` as one line of JSON on stdout, redacted, with the controls
// JSON leaves raw (C1, DEL) escaped: how every --json answer is printed.
void print_redacted(const Context& ctx, nlohmann::json j);

// Adds --json to a subcommand.
void add_json_flag(CLI::App* cmd, Context& ctx);

// A check for a whole-number option: "must be a whole number from MIN" (CLI11's
// own range checks print the bounds of a double).
CLI::Validator whole_number_from(uint64_t min);

// Dumps JSON, replacing invalid UTF-8 rather than failing.
std::string dump(const nlohmann::json& j, int indent = -1);

// "1 session", "3 sessions".
std::string count(uint64_t n, const std::string& noun);

// "2026-11-21 19:16:04" in local time.
std::string local_time(int64_t ts_us);

void register_log_commands(CLI::App& app, Context& ctx);
void register_sessions_command(CLI::App& app, Context& ctx);
void register_verify_command(CLI::App& app, Context& ctx);
void register_repair_command(CLI::App& app, Context& ctx);
void register_run_command(CLI::App& app, Context& ctx);
void register_approval_commands(CLI::App& app, Context& ctx);
void register_demo_command(CLI::App& app, Context& ctx);
void register_chat_command(CLI::App& app, Context& ctx);
void register_torture_command(CLI::App& app, Context& ctx);
void register_replay_command(CLI::App& app, Context& ctx);
void register_bundle_command(CLI::App& app, Context& ctx);
void register_trace_commands(CLI::App& app, Context& ctx);
void register_trace_export_command(CLI::App& trace, Context& ctx);
void register_collector_command(CLI::App& app, Context& ctx);
void register_gc_command(CLI::App& app, Context& ctx);
void register_mcp_commands(CLI::App& app, Context& ctx);
void register_node_command(CLI::App& app, Context& ctx);
void register_serve_command(CLI::App& app, Context& ctx);
void register_schedule_commands(CLI::App& app, Context& ctx);

}  // namespace carapace::cli
