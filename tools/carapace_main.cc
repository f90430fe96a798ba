// carapace: the command-line front end. Each subcommand is a thin layer over
// the library (tools/cmd_*.cc); this file only wires them up.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "tools/cli.h"

int main(int argc, char** argv) {
  using namespace carapace::cli;
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
  register_run_command(app, ctx);
  register_demo_command(app, ctx);
  register_chat_command(app, ctx);
  register_torture_command(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  return ctx.run ? ctx.run() : kExitUsage;
}
