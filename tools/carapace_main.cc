// carapace: the command-line front end. Each subcommand is a thin layer over
// the library (tools/cmd_*.cc); this file only wires them up.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <iostream>

#include <filesystem>

#include "runtime/config.h"
#include "runtime/logging.h"

#include "tools/cli.h"
#include "tools/stop_signals.h"

int main(int argc, char** argv) {
  using namespace carapace::cli;
  using carapace::configure_logging;
  using carapace::LogOptions;
  install_stop_signals();  // before any thread starts
  // A reader that goes away (`carapace run ... | head`) must not kill a
  // session: a write to the closed pipe fails (EPIPE) instead. Tool
  // processes start with every signal at its default (process_guard.cc).
  ::signal(SIGPIPE, SIG_IGN);
  // Logs go to stderr (and the home's logs/); stdout carries answers and --json output only.
  (void)configure_logging(LogOptions{});
  CLI::App app{"carapace: a durable, observable runtime for LLM agents"};
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.require_subcommand(1);
  Context ctx;
  app.add_option("--home", ctx.home_flag, "Data directory (default: $CARAPACE_HOME, else ~/.carapace)");
  std::string log_level;
  int verbose = 0;
  app.add_option("--log-level", log_level,
                 "Log lines on stderr from this level: trace, debug, info, warn (the default), error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "off"}));
  app.add_flag("-v,--verbose", verbose, "More log lines on stderr: -v info, -vv debug, -vvv trace");
  register_log_commands(app, ctx);
  register_sessions_command(app, ctx);
  register_verify_command(app, ctx);
  register_repair_command(app, ctx);
  register_run_command(app, ctx);
  register_demo_command(app, ctx);
  register_chat_command(app, ctx);
  register_torture_command(app, ctx);
  register_replay_command(app, ctx);
  register_bundle_command(app, ctx);
  register_trace_commands(app, ctx);
  register_collector_command(app, ctx);
  register_gc_command(app, ctx);
  register_mcp_commands(app, ctx);
  register_serve_command(app, ctx);
  app.allow_extras();  // an unknown command is named below, not reported as "a subcommand is required"
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A word where a command was expected: say which, and what there is.
    CLI::App* deepest = &app;
    while (!deepest->get_subcommands().empty()) deepest = deepest->get_subcommands().front();
    std::vector<std::string> extras = deepest->remaining();
    if (!extras.empty() && dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
      std::string where = deepest == &app ? "carapace" : "carapace " + deepest->get_name();
      std::cerr << "carapace: '" << extras.front() << "' is not a command of " << where << "; `" << where
                << " --help` lists them\n";
      return kExitUsage;
    }
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  std::vector<std::string> extras = app.remaining();
  for (CLI::App* sub = &app; sub != nullptr;) {
    auto subs = sub->get_subcommands();
    sub = subs.empty() ? nullptr : subs.front();
    if (sub != nullptr && !sub->remaining().empty()) extras = sub->remaining();
  }
  if (!extras.empty()) {
    std::cerr << "carapace: unexpected argument '" << extras.front() << "'; `carapace --help` lists the commands\n";
    return kExitUsage;
  }
  if (!ctx.run) return kExitUsage;
  if (log_level.empty()) log_level = verbose >= 3 ? "trace" : verbose == 2 ? "debug" : verbose == 1 ? "info" : "warn";
  // JSON lines go to the home's logs/ when the home is there and ours
  // (commands check it fully before trusting anything in it).
  LogOptions logs{.stderr_level = log_level};
  struct stat home_stat {};
  const std::string home = ctx.home();
  if (::stat(home.c_str(), &home_stat) == 0 && S_ISDIR(home_stat.st_mode) && home_stat.st_uid == ::geteuid() &&
      (home_stat.st_mode & 077) == 0) {
    logs.dir = home + "/logs";
  }
  // The home config's redaction rules join the known patterns, for every
  // output and log line (a config that does not load is reported by the
  // commands that use it).
  std::error_code exists_error;
  if (!logs.dir.empty() && std::filesystem::exists(home + "/config.json", exists_error)) {
    carapace::Config config;
    std::vector<std::string> warnings;
    std::unique_ptr<carapace::Redactor> made;
    carapace::Status loaded = carapace::load_config(home + "/config.json", &config, &warnings);
    if (loaded.ok()) {
      loaded = carapace::Redactor::make(
          carapace::Redactor::Options{.patterns = config.redaction_patterns, .paths = config.redaction_paths}, &made);
    }
    if (loaded.ok()) {
      std::shared_ptr<const carapace::Redactor> shared(std::move(made));
      ctx.use_redactor(shared);
      logs.redactor = shared;
    } else {
      std::cerr << "carapace: warning: " << ctx.shown(loaded.message())
                << "; only the built-in redaction rules apply\n";
    }
  }
  if (carapace::Status s = configure_logging(logs); !s.ok()) {
    std::cerr << "carapace: warning: " << s.message() << "; logging to stderr only\n";
    logs.dir.clear();
    (void)configure_logging(logs);
  }
  // A command that creates the home logs into it from then on.
  if (logs.dir.empty()) {
    ctx.home_ready = [&logs, home] {
      logs.dir = home + "/logs";
      if (carapace::Status s = configure_logging(logs); !s.ok()) {
        std::cerr << "carapace: warning: " << s.message() << "; logging to stderr only\n";
        logs.dir.clear();
        (void)configure_logging(logs);
      }
    };
  }
  // No exception escapes a command: whatever a library throws becomes an
  // error message and exit status 1.
  try {
    int code = ctx.run();
    for (auto& f : ctx.at_end) f();
    return code;
  } catch (const std::exception& e) {
    std::cerr << "carapace: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "carapace: internal error (an unknown exception)\n";
  }
  return kExitFailed;
}
