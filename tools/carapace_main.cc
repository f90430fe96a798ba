// carapace: the command-line front end. Each subcommand is a thin layer over
// the library (tools/cmd_*.cc); this file only wires them up.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/cli.h"
#include "tools/stop_signals.h"

int main(int argc, char** argv) {
  using namespace carapace::cli;
  install_stop_signals();  // before any thread starts
  // Logs go to stderr; stdout carries answers and --json output only.
  spdlog::set_default_logger(spdlog::stderr_color_mt("carapace"));
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"carapace: a durable, observable runtime for LLM agents"};
  app.set_help_all_flag("--help-all", "Show help for every subcommand");
  app.require_subcommand(1);
  Context ctx;
  app.add_option("--home", ctx.home_flag, "Data directory (default: $CARAPACE_HOME, else ~/.carapace)");
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
  // No exception escapes a command: whatever a library throws becomes an
  // error message and exit status 1.
  try {
    return ctx.run();
  } catch (const std::exception& e) {
    std::cerr << "carapace: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "carapace: internal error (an unknown exception)\n";
  }
  return kExitFailed;
}
